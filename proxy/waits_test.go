package proxy

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
)

// A passthrough request that waits out request_timeout for its upstream's
// max_concurrency slot is audited with the time it waited as its attempt's
// latency_ms (and so in contractd_upstream_duration_seconds), as a contract
// route's queued call is; it was 0, so dashboards showed instant upstream
// calls while clients waited the whole request_timeout.
func TestPassthroughConcurrencyWaitLatency(t *testing.T) {
	up := newFakeUpstream(t, always(validAnswer))
	c := cfg{RequestTimeout: "300ms"}
	yaml := strings.Replace(configYAML(up.URL(), c), "    timeout: 2s\n    max_retries: 0\n", "    timeout: 2s\n    max_retries: 0\n    max_concurrency: 1\n", 1)
	rt := testkit.LoadRuntime(t, filepath.Join("testdata", "contractd.yaml"), yaml)
	h := serveHarness(t, up, rt, c, &Admin{})
	tel := &doneEvents{}
	h.srv.Telemetry = tel
	u := rt.Routes["raw"].Upstream
	if u.MaxConcurrency != 1 {
		t.Fatalf("route raw's upstream %s has max_concurrency %d, want 1", u.Name, u.MaxConcurrency)
	}
	// The one slot is held for the whole request.
	release, err := h.caller.sem.acquire(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	r := h.post("/r/raw/v1/chat/completions", `{"model":"x","messages":[`+userHi+`]}`)
	wantError(t, r, http.StatusGatewayTimeout, typeUpstream, CodeUpstreamTimeout, nil)
	if !strings.Contains(string(r.Body), "max_concurrency") {
		t.Fatalf("not the max_concurrency 504: %s", r.Body)
	}
	ev := h.sink.waitEvent(t, wantRequestID(t, r))
	if ev.Outcome != audit.OutcomeUpstreamError || len(ev.Attempts) != 1 {
		t.Fatalf("audit outcome %q with %d attempts, want upstream_error with 1", ev.Outcome, len(ev.Attempts))
	}
	a := ev.Attempts[0]
	if a.LatencyMS < 250 || a.LatencyMS > ev.DurationMS {
		t.Errorf("attempt latency_ms %v, want the ~300 ms waited for the slot (duration_ms %v)", a.LatencyMS, ev.DurationMS)
	}
	if a.UpstreamStatus != 0 {
		t.Errorf("upstream_status %d for a call never made", a.UpstreamStatus)
	}
	tel.mu.Lock()
	defer tel.mu.Unlock()
	if len(tel.evs) != 1 || len(tel.evs[0].Attempts) != 1 || tel.evs[0].Attempts[0].LatencyMS != a.LatencyMS {
		t.Errorf("metrics saw %+v, want the audited attempt", tel.evs)
	}
	if h.up.Hits() != 0 {
		t.Errorf("the upstream was called %d times", h.up.Hits())
	}
}

// A request that waits for an identical one's verdict (review.dedupe_window)
// until its request_timeout runs out gets 504 upstream_timeout, audited
// rejected with no attempt: it called no upstream, as a request whose
// body waited out request_timeout for room in max_inflight_bytes, and
// upstream_error (whose failed attempt is its last entry) would count an
// upstream failure that did not happen. It was audited upstream_error.
func TestDedupeWaitTimeoutOutcome(t *testing.T) {
	gate := make(chan struct{})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		reply(w, 200, completion(invalidAnswer, "stop", 10, 5))
	}, cfg{UpTimeout: "5s"})
	tel := &doneEvents{}
	h.srv.Telemetry = tel
	first := make(chan *result, 1)
	go func() { first <- h.post("", failBody) }()
	for deadline := time.Now().Add(5 * time.Second); h.up.Hits() < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached the upstream")
		}
	}
	// The same route, prompt and contract (the same dedupe key); the next
	// request's request_timeout is short.
	h.reload(cfg{UpTimeout: "5s", RequestTimeout: "300ms"})
	r := h.post("", failBody)
	close(gate)
	wantError(t, r, http.StatusGatewayTimeout, typeUpstream, CodeUpstreamTimeout, nil)
	if !strings.Contains(string(r.Body), "identical request") {
		t.Fatalf("not the dedupe wait's 504: %s", r.Body)
	}
	id := wantRequestID(t, r)
	ev := h.sink.waitEvent(t, id)
	if ev.Outcome != audit.OutcomeRejected || ev.Status != 504 || ev.ErrorCode != string(CodeUpstreamTimeout) || len(ev.Attempts) != 0 {
		t.Errorf("audit outcome %q status %d error_code %q attempts %d, want rejected 504 upstream_timeout 0", ev.Outcome, ev.Status, ev.ErrorCode, len(ev.Attempts))
	}
	if ev.Deduplicated {
		t.Error("audited deduplicated: it was served no earlier verdict")
	}
	reviewID(t, <-first)
	if h.up.Hits() != 2 {
		t.Errorf("upstream hits %d, want 2 (the first request's two attempts)", h.up.Hits())
	}
	tel.mu.Lock()
	defer tel.mu.Unlock()
	for _, e := range tel.evs {
		if e.RequestID == id {
			if e.Outcome != audit.OutcomeRejected || len(e.Attempts) != 0 {
				t.Errorf("metrics saw outcome %q with %d attempts, want rejected with none", e.Outcome, len(e.Attempts))
			}
			return
		}
	}
	t.Errorf("metrics never saw request %s", id)
}
