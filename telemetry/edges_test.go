package telemetry_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/telemetry"
)

// waitAudit waits until the audit holds the event of request id (the
// handler may write it just after the client stopped waiting).
func (h *harness) waitAudit(id string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ev, ok := h.events()[id]; ok {
			return ev
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no audit event for %s:\n%s", id, h.audit.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClientGoneMidAttempt: a client that leaves while a contract attempt
// waits for the upstream is audited 499 rejected, and the attempt that ran
// (and was cut) is in the event, as the upstream call of a passthrough
// request cut the same way is: attempts_total counts it (result
// upstream_error), the upstream histogram observes it, and the audit, the
// request log line and the metrics agree with the attempt span.
func TestClientGoneMidAttempt(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.api.URL+"/v1/chat/completions",
		strings.NewReader(rawContractBody("classify", scenarioInput("hang"))))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	go func() {
		for len(h.up.Calls()) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	if resp, err := h.api.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("request finished with %d; want the client's cancel", resp.StatusCode)
	}
	spans := h.waitSpans(1)
	var id string
	for _, s := range spans {
		if s.Name == telemetry.SpanAttempt {
			t.Logf("attempt span status %v", s.Status)
		}
		if rid := attr(s, "contractd.request_id").AsString(); rid != "" {
			id = rid
		}
	}
	if id == "" {
		t.Fatal("no server span with a request id")
	}
	ev := h.waitAudit(id)
	if ev["status"] != 499.0 || ev["outcome"] != "rejected" || ev["error_code"] != "client_closed_request" {
		t.Fatalf("event status %v outcome %v error_code %v, want 499 rejected client_closed_request", ev["status"], ev["outcome"], ev["error_code"])
	}
	atts, _ := ev["attempts"].([]any)
	if len(atts) != 1 {
		t.Fatalf("attempts %v: want the one attempt that ran", ev["attempts"])
	}
	a := atts[0].(map[string]any)
	if a["attempt"] != 1.0 || a["upstream_status"] != 0.0 || a["finish_reason"] != "" || a["output_sha256"] != "" || a["temperature"] != 0.7 {
		t.Errorf("attempt %v: want attempt 1 at 0.7, upstream_status 0, no finish reason, no output", a)
	}
	if l, _ := a["latency_ms"].(float64); l < 15 {
		t.Errorf("latency_ms %v: want the time the call ran (>= 20 ms)", a["latency_ms"])
	}
	m := parseSamples(t, h.scrape())
	if got := m.get(t, telemetry.MetricRequests, "route", "classify", "outcome", "rejected"); got != 1 {
		t.Errorf("requests{classify,rejected} = %v, want 1", got)
	}
	if got := m.get(t, telemetry.MetricAttempts, "route", "classify", "attempt", "1", "result", "upstream_error"); got != 1 {
		t.Errorf("attempts{classify,1,upstream_error} = %v, want 1", got)
	}
	if got := m.get(t, telemetry.MetricUpstreamDuration+"_count", "route", "classify"); got != 1 {
		t.Errorf("upstream duration count{classify} = %v, want 1", got)
	}
	if !bytes.Contains([]byte(h.logs.String()), []byte(`"request_id":"`+id+`","route":"classify","outcome":"rejected","status":499,"attempts":1`)) {
		t.Errorf("request log line: want attempts 1:\n%s", h.logs.String())
	}
}

// TestHTTPRouteOfUncleanPath: a path answered without the ServeMux (one
// with "//", ".." or "." segments) is an unknown path, whose
// http_server_request_duration_seconds series has http_route "/" as the
// docs say, not a series without the label.
func TestHTTPRouteOfUncleanPath(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, p := range []string{"/v1//chat/completions", "/r/classify/../v1/chat/completions"} {
		resp, b := h.post(p, clientKey, rawContractBody("classify", scenarioInput("valid")), nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
	m := parseSamples(t, h.scrape())
	for _, s := range m.series("http_server_request_duration_seconds_count") {
		if !strings.Contains(s, "http_route=") {
			t.Errorf("series without http_route: %s", s)
		}
	}
	if got := m.get(t, "http_server_request_duration_seconds_count", "http_request_method", "POST", "http_response_status_code", "404",
		"http_route", "/", "url_scheme", "http"); got != 2 {
		t.Errorf("404s under http_route \"/\" = %v, want 2", got)
	}
}

// TestDeduplicatedReplayMetrics: the 422 served again from
// review.dedupe_window (a client retrying a 422) is one more needs_review request, with
// no attempt, no upstream call, no token and no violation: its audit line
// has attempts [] and deduplicated true, and the series move accordingly.
func TestDeduplicatedReplayMetrics(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	body := rawContractBody("classify", scenarioInput("review"))
	first, _ := h.post("/v1/chat/completions", clientKey, body, nil)
	m1 := parseSamples(t, h.scrape())
	again, _ := h.post("/v1/chat/completions", clientKey, body, nil)
	m2 := parseSamples(t, h.scrape())
	if first.StatusCode != 422 || again.StatusCode != 422 || again.Header.Get("X-Contract-Deduplicated") != "true" {
		t.Fatalf("statuses %d, %d (deduplicated %q)", first.StatusCode, again.StatusCode, again.Header.Get("X-Contract-Deduplicated"))
	}
	ev := h.events()[again.Header.Get("X-Request-Id")]
	if ev["outcome"] != "needs_review" || ev["deduplicated"] != true || ev["review_id"] != first.Header.Get("X-Request-Id") ||
		len(ev["attempts"].([]any)) != 0 || ev["error_code"] != "contract_violation" {
		t.Fatalf("replay's audit event %v", ev)
	}
	if len(h.up.Calls()) != 2 {
		t.Fatalf("upstream calls %d, want 2 (the first request's attempts only)", len(h.up.Calls()))
	}
	for k, v2 := range m2 {
		if !strings.HasPrefix(k, "contractd_") || strings.Contains(k, "_bucket{") || strings.Contains(k, "request_duration_seconds_sum") {
			continue
		}
		want := m1[k]
		if k == `contractd_requests_total{outcome="needs_review",route="classify"}` ||
			k == `contractd_request_duration_seconds_count{outcome="needs_review",route="classify"}` {
			want++
		}
		if v2 != want {
			t.Errorf("%s: %v -> %v, want %v", k, m1[k], v2, want)
		}
	}
	if got := m2.get(t, telemetry.MetricRequests, "route", "classify", "outcome", "needs_review"); got != 2 {
		t.Errorf("requests{classify,needs_review} = %v, want 2", got)
	}
}

// TestPassthroughFailureLogsCause: a passthrough request whose upstream
// cannot be reached is answered 502 and, as docs/observability.md says of
// every 5xx, its internal cause is logged in a "request failed" warning
// with the request id (the client's message says only "connection
// failed").
func TestPassthroughFailureLogsCause(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.up.Close() // nothing listens there any more
	resp, b := h.post("/v1/chat/completions", clientKey, `{"model":"raw","messages":[{"role":"user","content":"hello raw"}]}`, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d %s, want 502", resp.StatusCode, b)
	}
	id := resp.Header.Get("X-Request-Id")
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		if strings.Contains(line, `"msg":"request failed"`) {
			found = true
			if !strings.Contains(line, `"request_id":"`+id+`"`) || !strings.Contains(line, `"code":"upstream_error"`) ||
				!strings.Contains(line, "connect") || !strings.Contains(line, `"level":"WARN"`) {
				t.Errorf("request failed line: want WARN, request_id %s, code upstream_error and the connection error as cause:\n%s", id, line)
			}
			if strings.Contains(line, clientKey) || strings.Contains(line, upstreamKey) {
				t.Errorf("a key in the log line: %s", line)
			}
		}
	}
	if !found {
		t.Fatalf("no \"request failed\" line for the 502:\n%s", h.logs.String())
	}
}
