package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// logLines are the log records written to logs (the destination Run's
// goroutine and the test share) so far, decoded.
func logLines(t *testing.T, logs *testkit.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// logLinesOf is logLines' lines whose msg is msg.
func logLinesOf(t *testing.T, logs *testkit.SyncBuffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range logLines(t, logs) {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestStoreOpenFailuresLogged: a store that cannot be opened, retried by
// Run every Retry (a second in serve), is logged once with the spool it
// falls back to, not at every try (an hour's outage wrote 3,600 identical
// ERROR lines); when it opens, "review store open" says how many tries
// failed. When the spool cannot be written either (its directory another
// user's, a read-only file system), the line says the items are lost: it
// said "items are spooled" while every needs_review item was dropped
// (stored: false). A try cut short by serve stopping (ctx canceled: after
// a drain, or a start that could not listen) logs nothing: the store was
// not down.
func TestStoreOpenFailuresLogged(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spool, msg string
	}{
		{"spool writable", filepath.Join(dir, "review-spool.jsonl"), "review store unavailable; items are spooled"},
		// A path under a regular file: not writable whoever runs the test
		// (root included, whom a directory's mode does not stop).
		{"spool not writable", filepath.Join(notDir, "review-spool.jsonl"), "review store unavailable and the spool cannot be written; needs_review items are lost (stored: false)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var up atomic.Bool
			var tries atomic.Int64
			st, err := review.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "reviews.db"))
			if err != nil {
				t.Fatal(err)
			}
			open := func(ctx context.Context) (review.Store, error) {
				tries.Add(1)
				if up.Load() {
					return st, nil
				}
				return nil, errors.New("review store: connection refused")
			}
			logs := &testkit.SyncBuffer{}
			q := NewReviewQueueOpenedByRun(open, tc.spool, slog.New(slog.NewJSONHandler(logs, nil)))
			q.Retry = 5 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); q.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				if err := q.Close(); err != nil {
					t.Error(err)
				}
			}()

			for tries.Load() < 20 {
				time.Sleep(time.Millisecond)
			}
			var failed []map[string]any
			for _, l := range logLines(t, logs) {
				if strings.HasPrefix(l["msg"].(string), "review store unavailable") {
					failed = append(failed, l)
				}
			}
			if len(failed) != 1 || failed[0]["msg"] != tc.msg || failed[0]["spool"] != tc.spool || failed[0]["level"] != "ERROR" {
				t.Fatalf("after %d failed tries, %d lines: %v; want one %q", tries.Load(), len(failed), failed, tc.msg)
			}
			up.Store(true)
			var opened map[string]any
			for deadline := time.Now().Add(10 * time.Second); opened == nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				for _, l := range logLines(t, logs) {
					if l["msg"] == "review store open" {
						opened = l
					}
				}
			}
			if n, _ := opened["failed_tries"].(float64); opened == nil || n < 20 {
				t.Fatalf("review store open line %v: want failed_tries >= 20", opened)
			}
		})
	}

	t.Run("stopping", func(t *testing.T) {
		logs := &testkit.SyncBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		open := func(ctx context.Context) (review.Store, error) {
			cancel() // serve stops while the store is being opened
			return nil, ctx.Err()
		}
		q := NewReviewQueueOpenedByRun(open, filepath.Join(dir, "review-spool.jsonl"), slog.New(slog.NewJSONHandler(logs, nil)))
		q.Run(ctx)
		if l := logLines(t, logs); len(l) != 0 {
			t.Fatalf("an open cut short by the stop logged %v", l)
		}
	})
}

// TestSpoolDrainFailuresLogged: a spool that cannot be moved into an open
// store (PostgreSQL went down while serving, items spooled) is retried every
// Retry but logged once, then once a minute: it logged
// `review spool drain failed; will retry` at every try, once a second for
// the whole outage.
func TestSpoolDrainFailuresLogged(t *testing.T) {
	dir := t.TempDir()
	st, err := review.OpenSQLite(context.Background(), filepath.Join(dir, "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil { // every write fails from now on
		t.Fatal(err)
	}
	var tries atomic.Int64
	logs := &testkit.SyncBuffer{}
	q := NewReviewQueueOpenedByRun(func(context.Context) (review.Store, error) { tries.Add(1); return st, nil },
		filepath.Join(dir, "review-spool.jsonl"), slog.New(slog.NewJSONHandler(logs, nil)))
	q.Retry = 5 * time.Millisecond
	it := &review.Item{ID: "req_spooled", Status: review.StatusPending, CreatedAt: time.Now(), Route: "r", Input: json.RawMessage(`{}`), Request: []byte(`{}`)}
	if err := q.Spool.Append(it); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx) }()
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	n := len(logLinesOf(t, logs, "review spool drain failed; will retry"))
	if n != 1 || !q.Spool.Pending() {
		t.Fatalf("%d drain failure lines over 300 ms of 5 ms retries (spool pending: %v), want 1", n, q.Spool.Pending())
	}
}

// TestUnwritableSpoolWarnedAtStart: a spool that cannot be written (with
// store: postgres it sits beside the config file, which a systemd unit's
// ProtectSystem=strict or a read-only mount keeps read-only) is warned of
// when the queue starts, while the store works: nothing else said so
// until the store failed and every item was lost.
func TestUnwritableSpoolWarnedAtStart(t *testing.T) {
	dir := t.TempDir()
	st, err := review.OpenSQLite(context.Background(), filepath.Join(dir, "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spool string
		want  int
	}{{filepath.Join(notDir, "review-spool.jsonl"), 1}, {filepath.Join(dir, "review-spool.jsonl"), 0}} {
		logs := &testkit.SyncBuffer{}
		q := NewReviewQueueOpenedByRun(func(context.Context) (review.Store, error) { return st, nil }, tc.spool, slog.New(slog.NewJSONHandler(logs, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		q.Run(ctx)
		n := 0
		for _, l := range logLines(t, logs) {
			if l["msg"] == "the review spool cannot be written: needs_review items are lost while the store is down" && l["spool"] == tc.spool && l["level"] == "WARN" {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("spool %s: %d warnings, want %d: %v", tc.spool, n, tc.want, logLines(t, logs))
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// failingSink refuses every audit line, as a full disk does.
type failingSink struct{ n atomic.Int64 }

func (f *failingSink) Write(*audit.Event) error {
	f.n.Add(1)
	return errors.New("write audit.jsonl: no space left on device (injected)")
}
func (f *failingSink) Close() error { return nil }

// reviewCounts counts the review queue's store errors and lost items.
type reviewCounts struct {
	nopReviewMetrics
	storeErrs, lost atomic.Int64
}

func (c *reviewCounts) StoreError() { c.storeErrs.Add(1) }
func (c *reviewCounts) ItemLost()   { c.lost.Add(1) }

// TestFullDiskLogsOnceAMinute: on a full disk every needs_review request
// fails three writes (the review store's, the spool's, the audit's), and
// each logged an error line: three lines a request, not rate-limited,
// exactly when the disk (and often the log's own disk) is full. Each is
// now logged once, then at most once a minute with failed_writes (the
// failures since the last line, that one included); the metrics count
// every failure (contractd_review_store_errors_total,
// contractd_review_items_lost_total, which is new, and the audit's), and
// each request's own "request" line says audit_failed.
func TestFullDiskLogsOnceAMinute(t *testing.T) {
	rh := newReviewHarness(t)
	logs := &testkit.SyncBuffer{}
	lg := slog.New(slog.NewJSONHandler(logs, nil))
	rh.srv.Logger, rh.q.Log = lg, lg
	sink := &failingSink{}
	rh.srv.Audit = sink
	counts := &reviewCounts{}
	rh.q.Metrics = counts
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rh.q.Spool.Path = filepath.Join(notDir, "review-spool.jsonl") // not writable, whoever runs the test
	rh.store.fail.Store(true)

	msgs := []string{"review store write failed; spooling", "review spool write failed; item lost", "audit write failed"}
	send := func() string {
		t.Helper()
		r := rh.call("POST", "/v1/chat/completions", classifyReq, clientKey)
		if r.Status != 422 || r.errorObj()["review"].(map[string]any)["stored"] != false {
			t.Fatalf("status %d, want 422 with stored false: %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Request-Id")
	}
	const n = 5
	first := send()
	for range n - 1 {
		send()
	}
	for _, msg := range msgs {
		got := logLinesOf(t, logs, msg)
		if len(got) != 1 {
			t.Fatalf("%d %q lines for %d requests, want 1:\n%s", len(got), msg, n, logs)
		}
		id := got[0]["review_id"]
		if id == nil {
			id = got[0]["request_id"]
		}
		if id != first || got[0]["failed_writes"] != 1.0 {
			t.Errorf("%q: %v, want the first request's id %s and failed_writes 1", msg, got[0], first)
		}
	}
	if a, s, l := sink.n.Load(), counts.storeErrs.Load(), counts.lost.Load(); a != n || s != n || l != n {
		t.Errorf("counted %d audit failures, %d store errors, %d lost items; want %d each", a, s, l, n)
	}
	if got := len(logLinesOf(t, logs, "request")); got != n {
		t.Errorf("%d request lines, want %d", got, n)
	}
	for _, m := range logLinesOf(t, logs, "request") {
		if m["audit_failed"] != true {
			t.Errorf("request line without audit_failed: %v", m)
		}
	}

	// A minute after the last line, the next failure of each is logged,
	// with the failures since (the n-1 not logged and this one).
	for _, w := range []*warnEvery{&rh.srv.auditWarn, &rh.q.storeWarn, &rh.q.spoolWarn} {
		w.last.Store(time.Now().Add(-warnInterval).UnixNano())
	}
	last := send()
	for _, msg := range msgs {
		got := logLinesOf(t, logs, msg)
		if len(got) != 2 {
			t.Fatalf("%d %q lines a minute later, want 2", len(got), msg)
		}
		if id := got[1]["review_id"]; id != last && got[1]["request_id"] != last || got[1]["failed_writes"] != float64(n) {
			t.Errorf("%q a minute later: %v, want request %s and failed_writes %d", msg, got[1], last, n)
		}
	}
}
