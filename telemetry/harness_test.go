package telemetry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/telemetry"
)

// Fake keys: they must never show up in audit, logs, spans or metrics.
const (
	clientKey   = "sk-test-client-7f3a9c2d41"
	wrongKey    = "sk-test-client-WRONG-5e6f"
	upstreamKey = "sk-test-upstream-91bd0c77e2"
	clientEnv   = "CONTRACTD_TELTEST_CLIENT_KEYS"
	// upstreamErrMark is in the fake upstream's 500 error message: spans
	// must not carry upstream messages.
	upstreamErrMark = "UPSTREAM-ERROR-MESSAGE-MARK"
)

// Scripted usage of every fake completion; SCENARIO-budget reports the
// big usage, which exhausts classify-tight's budget after attempt 1.
const (
	upPrompt     = 11
	upCompletion = 7
	upTotal      = 18

	bigPrompt     = 4000
	bigCompletion = 1000
	bigTotal      = 5000
)

const testConfig = `
server:
  api_keys_env: ` + clientEnv + `
  request_timeout: 10s
audit:
  sink: none
  include_content: %t
upstreams:
  - name: fake
    base_url: %s
    api_key_env: CONTRACTD_TELTEST_UPSTREAM_KEY
    timeout: 5s
    max_retries: 0
labels:
  - name: intent
    values: [claim_report, billing_question, other]
prompts:
%scontracts:
  - name: classify_v1
    schema:
      type: object
      required: [intent]
      additionalProperties: false
      properties: {intent: {type: string}}
    policies:
      labels: [{path: /intent, set: intent}]
routes:
  - {name: classify, upstream: fake, model: gpt-test, prompt: classify, contract: classify_v1,
     temperature: 0.7, max_output_tokens: 100, budget: {max_total_tokens: 100000}}
  - {name: classify-tight, upstream: fake, model: gpt-test, prompt: classify, contract: classify_v1,
     temperature: 0.7, max_output_tokens: 100, budget: {max_total_tokens: 2000}}
  - name: raw
    upstream: fake
    model: gpt-raw
    passthrough: true
`

// upCall is one request the fake upstream received.
type upCall struct {
	Auth        string
	Traceparent string
	Body        []byte
}

// fakeUpstream answers chat completions by scenario: the subject of the
// contract input names it. SCENARIO-valid: valid at once; -retry: prose at
// temperature > 0, valid at 0; -review: invalid at every temperature (a
// label violation, then an extra member); -fail: HTTP 500; -budget: invalid
// with a huge usage. A passthrough request (model gpt-raw) with
// "stream": true gets an SSE stream. testkit.Upstream records the calls
// (benchmarks turn that off with SetQuiet).
type fakeUpstream struct {
	*testkit.Upstream
	// gate, when set, holds a streamed reply after its first event until
	// the test closes it (streaming must flush through every wrapper).
	gate chan struct{}
}

func newFakeUpstream(t testing.TB) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{}
	f.Upstream = testkit.NewUpstream(t, f.serve)
	return f
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
	var req struct {
		Model       string   `json:"model"`
		Stream      bool     `json:"stream"`
		Temperature *float64 `json:"temperature"`
		Messages    []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(c.Body, &req)
	var text strings.Builder
	for _, m := range req.Messages {
		text.WriteString(m.Content)
	}
	hot := req.Temperature != nil && *req.Temperature > 0
	content := `{"intent":"billing_question"}`
	pt, ct := upPrompt, upCompletion
	switch s := text.String(); {
	case req.Model == "gpt-raw" && req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i, piece := range []string{"raw ", "passthrough ", "reply"} {
			if i == 1 && f.gate != nil && r.Header.Get("X-Test-Gate") != "" {
				<-f.gate
			}
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-raw\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"+
				"\"model\":\"gpt-raw-0613\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", piece)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	case req.Model == "gpt-raw":
		content = "raw passthrough reply"
	case strings.Contains(s, "SCENARIO-hang"):
		// Held until the caller gives up (the client left): the attempt
		// runs and never answers.
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return
	case strings.Contains(s, "SCENARIO-budget"):
		content = `{"intent":"nonsense"}`
		pt, ct = bigPrompt, bigCompletion
	case strings.Contains(s, "SCENARIO-fail"):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"message":"overloaded %s"}}`, upstreamErrMark)
		return
	case strings.Contains(s, "SCENARIO-retry") && hot:
		content = "Sure! The intent is billing."
	case strings.Contains(s, "SCENARIO-review") && hot:
		content = `{"intent":"nonsense"}`
	case strings.Contains(s, "SCENARIO-review"):
		content = `{"intent":"other","extra":true}`
	}
	testkit.Reply(w, http.StatusOK, testkit.Completion{ID: "chatcmpl-fake", Model: req.Model + "-0613",
		Content: content, PromptTokens: pt, CompletionTokens: ct}.JSON())
}

// Calls are the calls recorded so far: their Authorization and
// Traceparent headers and body.
func (f *fakeUpstream) Calls() []upCall {
	var out []upCall
	for _, c := range f.Upstream.Calls() {
		out = append(out, upCall{Auth: c.Header.Get("Authorization"), Traceparent: c.Header.Get("Traceparent"), Body: c.Body})
	}
	return out
}

// harness is a full contractd API (proxy + telemetry middleware) in front
// of a fake upstream.
type harness struct {
	t     testing.TB
	rt    *config.Runtime
	up    *fakeUpstream
	tel   *telemetry.Telemetry
	spans *tracetest.InMemoryExporter
	audit *testkit.SyncBuffer
	logs  *testkit.SyncBuffer
	// handler is the in-process API (benchmarks call it directly); api
	// serves it over loopback.
	handler http.Handler
	api     *httptest.Server
	upURL   string
}

type harnessOpts struct {
	includeContent bool
	telemetryOff   bool
	// envExporter leaves Options.SpanExporter nil: the OTEL_* environment
	// decides (OTLP or nothing); h.spans stays nil.
	envExporter bool
	sink        audit.Sink            // nil: a writer sink on h.audit
	exporter    sdktrace.SpanExporter // nil: an in-memory exporter in h.spans
	batch       bool                  // batch span processor (benchmarks)
	discard     bool                  // logs and audit to io.Discard (benchmarks)
}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, up: newFakeUpstream(t), audit: &testkit.SyncBuffer{}, logs: &testkit.SyncBuffer{}}
	h.upURL = h.up.RootURL()
	t.Setenv(clientEnv, clientKey)
	rt := testkit.LoadRuntime(t, "/tmp/teltest/contractd.yaml", fmt.Sprintf(testConfig, o.includeContent, h.upURL, testkit.ClassifyPrompt("Classify the email.")))
	h.rt = rt
	var logw, auditw io.Writer = h.logs, h.audit
	if o.discard {
		logw, auditw = io.Discard, io.Discard
	}
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug})))
	caller := proxy.NewCaller(func(*config.Upstream) string { return upstreamKey })
	sink := o.sink
	if sink == nil {
		sink = audit.NewWriter(auditw)
	}
	srv := proxy.NewServer(rt, caller, sink, logger)
	var handler http.Handler
	if o.telemetryOff {
		handler = srv.Handler(nil)
	} else {
		exp := o.exporter
		if exp == nil && !o.envExporter {
			h.spans = tracetest.NewInMemoryExporter()
			exp = h.spans
		}
		tel, err := telemetry.New(telemetry.Options{SpanExporter: exp, SyncExport: !o.batch, Logger: logger, Global: true})
		if err != nil {
			t.Fatalf("telemetry: %v", err)
		}
		t.Cleanup(func() {
			_ = tel.Shutdown(context.Background())
			otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) // back to a no-op
		})
		h.tel = tel
		srv.Telemetry = tel
		handler = tel.Middleware(srv.Handler(nil))
	}
	h.handler = handler
	h.api = httptest.NewServer(handler)
	t.Cleanup(h.api.Close)
	return h
}

// post sends a chat-completions request and returns the response with its
// body read.
func (h *harness) post(path, key string, body any, hdr map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	var b []byte
	switch v := body.(type) {
	case string: // exact bytes
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			h.t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, h.api.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.api.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return resp, rb
}

// scrape returns the /metrics exposition.
func (h *harness) scrape() string {
	h.t.Helper()
	return scrape(h.t, h.tel)
}

// scrape returns tel's /metrics exposition.
func scrape(t testing.TB, tel *telemetry.Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

// bareTelemetry is telemetry with nothing configured (an empty
// environment: metrics only), shut down when the test ends.
func bareTelemetry(t testing.TB) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// events parses the audit lines by request id.
func (h *harness) events() map[string]map[string]any {
	h.t.Helper()
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(h.audit.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			h.t.Fatalf("audit line is not JSON: %v: %s", err, line)
		}
		out[m["request_id"].(string)] = m
	}
	return out
}

// rawContractBody is a contract-route request whose contract_input is
// exactly input (so input_sha256 can be checked against it).
func rawContractBody(route, input string) string {
	return `{"model":"` + route + `","messages":[],"contract_input":` + input + `}`
}

// scenarioInput is the contract_input of a scenario, as exact bytes.
func scenarioInput(scenario string) string {
	return `{"subject":"SCENARIO-` + scenario + ` please classify this customer email about a billing problem","body":"Why was I billed twice this month?"}`
}

// serverSpans waits until n server spans have ended (the server span ends
// after the handler returns, which can be just after the client read the
// whole response) and returns every span recorded.
func (h *harness) waitSpans(n int) tracetest.SpanStubs {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := h.spans.GetSpans()
		got := 0
		for _, s := range spans {
			if s.SpanKind == trace.SpanKindServer {
				got++
			}
		}
		if got >= n {
			return spans
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("waited for %d server spans, have %d", n, got)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// serverSpan is the server span of the request with id rid.
func serverSpan(t testing.TB, spans tracetest.SpanStubs, rid string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer && attr(s, "contractd.request_id").AsString() == rid {
			return s
		}
	}
	t.Fatalf("no server span with contractd.request_id %s", rid)
	return tracetest.SpanStub{}
}

// children are the spans whose parent is p, in start order.
func children(spans tracetest.SpanStubs, p tracetest.SpanStub) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Parent.SpanID() == p.SpanContext.SpanID() && s.Parent.TraceID() == p.SpanContext.TraceID() {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartTime.Before(out[j].StartTime) })
	return out
}

// attr is the value of span attribute key (an empty Value when absent).
func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func hasAttr(s tracetest.SpanStub, key string) bool {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return true
		}
	}
	return false
}

// samples parses a Prometheus text exposition into sample values keyed by
// `name{k="v",...}` with the labels sorted by name.
type samples map[string]float64

func parseSamples(t testing.TB, text string) samples {
	t.Helper()
	out := samples{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			t.Fatalf("bad exposition line %q", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("bad value in %q: %v", line, err)
		}
		series := line[:sp]
		name, labels := series, map[string]string{}
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name = series[:i]
			body := strings.TrimSuffix(series[i+1:], "}")
			for body != "" {
				eq := strings.IndexByte(body, '=')
				k := body[:eq]
				rest := body[eq+2:] // after ="
				end := strings.IndexByte(rest, '"')
				labels[k] = rest[:end]
				body = strings.TrimPrefix(rest[end+1:], ",")
			}
		}
		out[seriesKey(name, labels)] = v
	}
	return out
}

func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// get is a sample's value; kv alternates label names and values. A missing
// series fails the test.
func (s samples) get(t testing.TB, name string, kv ...string) float64 {
	t.Helper()
	labels := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	k := seriesKey(name, labels)
	v, ok := s[k]
	if !ok {
		t.Fatalf("no series %s", k)
	}
	return v
}

// series lists the keys of every sample of metric name.
func (s samples) series(name string) []string {
	var out []string
	for k := range s {
		if strings.HasPrefix(k, name+"{") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
