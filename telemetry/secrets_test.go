package telemetry_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// spanText renders everything a span exporter would ship: names, status,
// attributes, events, links and the resource.
func spanText(spans tracetest.SpanStubs) string {
	var b strings.Builder
	kv := func(attrs []attribute.KeyValue) {
		for _, a := range attrs {
			b.WriteString(string(a.Key) + "=" + a.Value.Emit() + "\n")
		}
	}
	for _, s := range spans {
		b.WriteString(s.Name + "\n" + s.Status.Description + "\n")
		kv(s.Attributes)
		for _, e := range s.Events {
			b.WriteString(e.Name + "\n")
			kv(e.Attributes)
		}
		for _, l := range s.Links {
			kv(l.Attributes)
		}
		if s.Resource != nil {
			kv(s.Resource.Attributes())
		}
	}
	return b.String()
}

// TestNoSecretWritten greps every audit byte, log byte, span attribute
// and the /metrics exposition for the client keys (right and wrong) and
// the upstream key, with include_content off and on.
func TestNoSecretWritten(t *testing.T) {
	for _, include := range []bool{false, true} {
		h := newHarness(t, harnessOpts{includeContent: include})
		res := runScenarios(t, h)
		// The client also sends its key in the headers contractd may
		// forward or trace.
		h.post("/v1/chat/completions", clientKey, rawContractBody("classify", scenarioInput("valid")),
			map[string]string{"X-Request-Id": "client-" + clientKey, "Baggage": "k=" + clientKey})
		h.post("/v1/chat/completions", clientKey, passthroughBody, map[string]string{"Tracestate": "k=v"})
		spans := h.waitSpans(len(res) + 2)

		// Positive controls: the keys were in play.
		calls := h.up.Calls()
		if len(calls) == 0 {
			t.Fatal("no upstream calls")
		}
		for _, c := range calls {
			if c.Auth != "Bearer "+upstreamKey {
				t.Errorf("upstream Authorization %q, want the upstream key", c.Auth)
			}
			if strings.Contains(string(c.Body), clientKey) {
				t.Errorf("the client key reached the upstream in a body")
			}
		}
		if res["wrong_key"].Status != 401 || res["valid"].Status != 200 {
			t.Fatal("client keys not enforced")
		}

		sources := map[string]string{
			"audit":   h.audit.String(),
			"logs":    h.logs.String(),
			"spans":   spanText(spans),
			"metrics": h.scrape(),
		}
		for what, text := range sources {
			if text == "" {
				t.Errorf("%s: nothing recorded", what)
			}
			for _, secret := range []string{clientKey, wrongKey, upstreamKey, "Bearer "} {
				if strings.Contains(text, secret) {
					t.Errorf("include_content=%v: %s contains %q", include, what, secret)
				}
			}
		}
		// Spans never carry the upstream's error message either.
		if strings.Contains(sources["spans"], upstreamErrMark) {
			t.Errorf("spans carry the upstream's error message")
		}
	}
}
