package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
)

// Passthrough routes redact the upstream's key, and any Authorization
// value, from the error bodies they relay on the Responses edge as on chat
// completions, plain or gzip-encoded.
func TestPassthroughResponsesRedactsErrorBodies(t *testing.T) {
	up := testkit.NewUpstream(t, echoKeyUpstream)
	h := newHarnessOn(t, up, cfg{})
	for _, tc := range []struct{ name, path, enc string }{
		{"by model", respPath, ""},
		{"by model gzip", respPath, "gzip"},
		{"by route path", "/r/raw-fast/v1/responses", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRedactedRelay(t, h, tc.path, `{"model":"raw-fast","input":"hi"}`, tc.enc)
		})
	}
	for _, c := range up.Calls() {
		if c.Path != "/v1/responses" {
			t.Errorf("upstream path %q, want its /responses", c.Path)
		}
	}
}

// request_timeout running out is 504 upstream_error upstream_timeout,
// wherever the request was waiting: here for room in max_inflight_bytes,
// which the busy wait (1 s) would otherwise end in 503 server_busy.
func TestRequestTimeoutWaitingForRoom(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{RequestTimeout: "300ms", ServerExtra: "  max_inflight_bytes: 4096"})
	if err := h.srv.inflight.acquire(context.Background(), 4096, 4096); err != nil {
		t.Fatal(err)
	}
	defer h.srv.inflight.release(4096)
	start := time.Now()
	r := h.post("", `{"model":"free","messages":[`+userHi+`]}`)
	wantError(t, r, 504, "upstream_error", "upstream_timeout", nil)
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Errorf("answered after %v: the busy wait, not request_timeout, ended it", el)
	}
	// Audited rejected: no upstream was called, contractd refused it
	// (docs/observability.md's outcome table).
	if ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id")); ev.Status != 504 || ev.ErrorCode != "upstream_timeout" || ev.Outcome != "rejected" {
		t.Errorf("audit status %d code %q outcome %q", ev.Status, ev.ErrorCode, ev.Outcome)
	}
	if h.up.Hits() != 0 {
		t.Errorf("upstream called %d times", h.up.Hits())
	}
}

// The reviewer page's paths answer what they do not serve in the error
// envelope, 404 not_found with an X-Request-Id, as every other path does;
// so does /metrics on a server without metrics.
func TestAdminPathsErrorEnvelope(t *testing.T) {
	admin := httptest.NewServer(&Admin{})
	defer admin.Close()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/review/nope.js"},
		{"GET", "/review/assets/app.js"},
		{"POST", "/review/"},
		{"DELETE", "/review/app.js"},
		{"GET", "/metrics"},
	} {
		req, _ := http.NewRequest(tc.method, admin.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var env struct {
			Error struct {
				Type, Code string
				Param      *string
			}
		}
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &env) != nil ||
			env.Error.Type != "invalid_request_error" || env.Error.Code != "not_found" || !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
			t.Errorf("%s %s: %d %q %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
	// What the page serves is unchanged.
	resp, err := http.Get(admin.URL + "/review/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("/review/: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// An upstream reply counts in max_inflight_bytes while it is held: with
// the budget nearly full of other bodies, a contract route's reply that
// does not fit waits up to a second, then the request gets 503
// server_busy with Retry-After: 1; with room, the same request succeeds.
func TestUpstreamReplyCountsInInflight(t *testing.T) {
	reply := completion(`{"answer":"`+strings.Repeat("a", 6000)+`"}`, "stop", 10, 5)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		// A known size: the reply is held at exactly its length.
		w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
		testkit.Reply(w, 200, reply)
	}, cfg{ServerExtra: "  max_inflight_bytes: 8192"})
	const held = 4096 // another request's body, say
	if err := h.srv.inflight.acquire(context.Background(), held, 8192); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"free","messages":[` + userHi + `]}`
	r := h.post("", body)
	wantError(t, r, 503, "server_error", "server_busy", nil)
	if r.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if h.up.Hits() != 1 {
		t.Errorf("upstream hits %d: a reply refused for room is not retried", h.up.Hits())
	}
	// contractd refused it, the upstream answered: rejected, as a body
	// refused for room is (TestServerBusyIsRejected), not upstream_error.
	if ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id")); ev.Outcome != audit.OutcomeRejected || ev.Status != 503 || ev.ErrorCode != "server_busy" {
		t.Errorf("audit outcome %q status %d code %q, want rejected 503 server_busy", ev.Outcome, ev.Status, ev.ErrorCode)
	}
	h.srv.inflight.release(held)
	if r := h.post("", body); r.Status != 200 {
		t.Fatalf("with room: %d %s", r.Status, r.Body)
	}
	if st := h.srv.LimitStats(); st.InflightBytes != 0 {
		t.Errorf("%d bytes still held after both requests", st.InflightBytes)
	}
}

// A budget smaller than the 32 KiB a reply of unknown size is first held
// at still serves contract routes: the first hold is cut to the budget's
// half, so a small chunked (or transparently gunzipped) reply fits beside
// the request's body.
func TestSmallInflightBudgetServesChunkedReplies(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.(http.Flusher).Flush() // no Content-Length: the size is unknown
		_, _ = w.Write(completion(validAnswer, "stop", 10, 5))
	}, cfg{ServerExtra: "  max_inflight_bytes: 16384"})
	start := time.Now()
	r := h.post("", `{"model":"free","messages":[`+userHi+`]}`)
	if r.Status != 200 {
		t.Fatalf("max_inflight_bytes 16384: %d %s", r.Status, r.Body)
	}
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Errorf("took %v: the reply waited for room it should have had", el)
	}
}

// A request refused 503 server_busy (no room in max_inflight_bytes for its
// body within the busy wait) is audited, and counted in
// contractd_requests_total, with outcome rejected: contractd refused it and
// no upstream was called, so it is not an upstream_error.
func TestServerBusyIsRejected(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{ServerExtra: "  max_inflight_bytes: 4096"})
	if err := h.srv.inflight.acquire(context.Background(), 4096, 4096); err != nil {
		t.Fatal(err)
	}
	r := h.post("", `{"model":"free","messages":[`+userHi+`]}`)
	h.srv.inflight.release(4096)
	wantError(t, r, 503, "server_error", "server_busy", nil)
	if r.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id")); ev.Outcome != audit.OutcomeRejected || ev.Status != 503 || ev.ErrorCode != "server_busy" {
		t.Errorf("audit outcome %q status %d code %q, want rejected 503 server_busy", ev.Outcome, ev.Status, ev.ErrorCode)
	}
	if h.up.Hits() != 0 {
		t.Errorf("upstream called %d times", h.up.Hits())
	}
}
