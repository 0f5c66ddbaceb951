package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// readFaultStore fails every read (Get, List, Export) while fail is set.
type readFaultStore struct {
	*faultStore
	fail atomic.Bool
}

var errReadInjected = errors.New("disk I/O error (injected read)")

func (f *readFaultStore) Get(ctx context.Context, id string) (*review.Item, error) {
	if f.fail.Load() {
		return nil, errReadInjected
	}
	return f.faultStore.Get(ctx, id)
}

func (f *readFaultStore) List(ctx context.Context, fl review.Filter) ([]*review.Item, string, error) {
	if f.fail.Load() {
		return nil, "", errReadInjected
	}
	return f.faultStore.List(ctx, fl)
}

// TestReviewStoreErrorLogsRequestID: the error line logged when the review
// store fails under a client poll or an admin call carries that request's
// request_id (its X-Request-Id), as every line about a request does
// (docs/observability.md, Logs), so the 503 a client or reviewer reports
// leads to its cause.
func TestReviewStoreErrorLogsRequestID(t *testing.T) {
	rh := newReviewHarness(t)
	logs := &testkit.SyncBuffer{}
	rh.srv.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	id := rh.needsReview(classifyReq)
	rs := &readFaultStore{faultStore: rh.store}
	rh.q.store.Store(ptrTo[review.Store](rs))
	rs.fail.Store(true)

	calls := []struct{ method, path, key, msg string }{
		{"GET", "/v1/reviews/" + id, clientKey, "review store read failed"},
		{"GET", "/admin/reviews/" + id, adminKey, "review store failed"},
		{"GET", "/admin/reviews", adminKey, "review store failed"},
		{"POST", "/admin/reviews/" + id + "/rerun", adminKey, "review store failed"},
		{"POST", "/admin/reviews/" + id + "/approve", adminKey, "review store failed"},
	}
	for _, c := range calls {
		body := ""
		if strings.HasSuffix(c.path, "/approve") {
			body = `{"reviewer":"ann","output":{"intent":"other"}}`
		}
		before := len(logs.String())
		r := rh.call(c.method, c.path, body, c.key)
		if r.Status != 503 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
		rid := r.Header.Get("X-Request-Id")
		var found bool
		for _, line := range strings.Split(strings.TrimSpace(logs.String()[before:]), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if m["msg"] != c.msg {
				continue
			}
			found = true
			if m["request_id"] != rid || rid == "" {
				t.Errorf("%s %s: %q line has request_id %v, want the response's %q", c.method, c.path, c.msg, m["request_id"], rid)
			}
		}
		if !found {
			t.Errorf("%s %s: no %q line in\n%s", c.method, c.path, c.msg, logs.String()[before:])
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestPollReadFailureLogsOnceAMinute: while the store's reads fail (down,
// or hung past its deadline), every client poll of an item not in the
// spool fails alike, and each logged "review store read failed": a client
// polling every second wrote an error line a second for the whole outage.
// As the other outage lines: the first is logged (with its request_id),
// then at most one a minute with failed_reads (the failures since the last
// line); a read that succeeds again logs "review store read again" with
// the outage's failures, and the next failure is logged at once.
func TestPollReadFailureLogsOnceAMinute(t *testing.T) {
	rh := newReviewHarness(t)
	logs := &testkit.SyncBuffer{}
	lg := slog.New(slog.NewJSONHandler(logs, nil))
	rh.srv.Logger, rh.q.Log = lg, lg
	id := rh.needsReview(classifyReq)
	rs := &readFaultStore{faultStore: rh.store}
	rh.q.store.Store(ptrTo[review.Store](rs))
	rs.fail.Store(true)
	poll := func() string {
		t.Helper()
		r := rh.call("GET", "/v1/reviews/"+id, "", clientKey)
		if r.Status != 503 {
			t.Fatalf("poll with the store failing: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Request-Id")
	}
	const failed = "review store read failed"
	const n = 5
	first := poll()
	for range n - 1 {
		poll()
	}
	if got := logLinesOf(t, logs, failed); len(got) != 1 || got[0]["request_id"] != first || got[0]["failed_reads"] != 1.0 {
		t.Fatalf("%d lines for %d failed polls, want one with the first poll's request_id %s and failed_reads 1: %v", len(got), n, first, got)
	}
	// A minute after the last line, the next failure is logged with the
	// failures since (the n-1 not logged and this one).
	rh.q.readWarn.last.Store(time.Now().Add(-warnInterval).UnixNano())
	last := poll()
	if got := logLinesOf(t, logs, failed); len(got) != 2 || got[1]["request_id"] != last || got[1]["failed_reads"] != float64(n) {
		t.Fatalf("a minute later: %v, want a second line with request_id %s and failed_reads %d", got, last, n)
	}
	// The store answers again: said once, with the outage's failures.
	rs.fail.Store(false)
	if r := rh.call("GET", "/v1/reviews/"+id, "", clientKey); r.Status != 200 {
		t.Fatalf("poll once the store answers: %d %s", r.Status, r.Body)
	}
	rh.call("GET", "/v1/reviews/"+id, "", clientKey)
	if got := logLinesOf(t, logs, "review store read again"); len(got) != 1 || got[0]["failed_reads"] != float64(n+1) {
		t.Fatalf("recovery lines %v, want one with failed_reads %d", got, n+1)
	}
	// The next outage is logged at once.
	rs.fail.Store(true)
	again := poll()
	if got := logLinesOf(t, logs, failed); len(got) != 3 || got[2]["request_id"] != again || got[2]["failed_reads"] != 1.0 {
		t.Fatalf("the next outage's first failure: %v, want a third line with request_id %s and failed_reads 1", got, again)
	}
}

// TestCancelledPollLogsNothing: a client that gives up a long poll
// (GET /v1/reviews/{id}?wait=) before the item is resolved is not a review
// store failure. The read after the wait ran on the gone request's context,
// failed with "context canceled", and was logged at ERROR as "review store
// read failed" (with a 503 to nobody): the session 14 soak logged one such
// line per cancelled poll, an error alert fed by ordinary client timeouts.
// Now the client's leaving answers 499, as elsewhere, and logs nothing; the
// waiter is unsubscribed.
func TestCancelledPollLogsNothing(t *testing.T) {
	rh := newReviewHarness(t)
	logs := &testkit.SyncBuffer{}
	rh.srv.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	id := rh.needsReview(classifyReq)
	hub := rh.q.Notifier.(*review.Hub)
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, "GET", rh.front.URL+"/v1/reviews/"+id+"?wait=30s", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+clientKey)
		done := make(chan error, 1)
		go func() {
			resp, err := rh.client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		if !testkit.WaitFor(5*time.Second, 5*time.Millisecond, func() bool { return hub.Waiting() == 1 }) {
			t.Fatal("the poll never subscribed")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("poll: %v, want the client's cancel", err)
		}
		if !testkit.WaitFor(5*time.Second, 5*time.Millisecond, func() bool { return hub.Waiting() == 0 }) {
			t.Fatal("the cancelled poll is still subscribed")
		}
	}
	// Close waits for every handler to return: each has written its log
	// lines by then.
	rh.front.Close()
	if s := logs.String(); strings.Contains(s, "review store read failed") || strings.Contains(s, `"level":"ERROR"`) {
		t.Fatalf("cancelled polls logged an error:\n%s", s)
	}
}

// An item spooled because the store failed is answered from the spool
// while the store's reads fail too (a store down, or hung past its
// deadline): the client the 422 told to poll it gets it, pending, not 503
// review_store_unavailable for the whole outage; the reviewer's GET too.
func TestSpooledItemReadWhileTheStoreFails(t *testing.T) {
	rh := newReviewHarness(t)
	rs := &readFaultStore{faultStore: rh.store}
	rh.q.store.Store(ptrTo[review.Store](rs))
	rh.store.fail.Store(true)
	rs.fail.Store(true)
	id := rh.needsReview(classifyReq)
	if !rh.q.Spool.Pending() {
		t.Fatal("the 422 was not spooled")
	}
	for _, c := range []struct{ path, key string }{{"/v1/reviews/" + id, clientKey}, {"/admin/reviews/" + id, adminKey}} {
		r := rh.call("GET", c.path, "", c.key)
		if r.Status != 200 || r.JSON["id"] != id || r.JSON["status"] != "pending" {
			t.Fatalf("GET %s while the store fails: %d %s", c.path, r.Status, r.Body)
		}
	}
	// An item that is in neither still gets the store's failure.
	wantError(t, rh.call("GET", "/v1/reviews/req_elsewhere", "", clientKey), 503, "server_error", "review_store_unavailable", nil)
}
