package proxy

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

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
