package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/panics"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// panicStore panics (with panicMarker, as request text would be) in the
// calls named in panicIn, as many times as each count says.
type panicStore struct {
	review.Store
	mu      sync.Mutex
	panicIn map[string]int
}

func (p *panicStore) maybePanic(call string) {
	p.mu.Lock()
	n := p.panicIn[call]
	if n > 0 {
		p.panicIn[call] = n - 1
	}
	p.mu.Unlock()
	if n > 0 {
		panic(panicMarker)
	}
}

func (p *panicStore) Get(ctx context.Context, id string) (*review.Item, error) {
	p.maybePanic("Get")
	return p.Store.Get(ctx, id)
}

func (p *panicStore) List(ctx context.Context, f review.Filter) ([]*review.Item, string, error) {
	p.maybePanic("List")
	return p.Store.List(ctx, f)
}

func (p *panicStore) DeleteResolvedBefore(ctx context.Context, t time.Time) (int, error) {
	p.maybePanic("DeleteResolvedBefore")
	return p.Store.DeleteResolvedBefore(ctx, t)
}

func (p *panicStore) ClaimDeliveries(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]review.Delivery, error) {
	p.maybePanic("ClaimDeliveries")
	return p.Store.ClaimDeliveries(ctx, now, limit, lease)
}

func (p *panicStore) RecentDedupe(ctx context.Context, since, now time.Time, limit int) ([]review.DedupeRecord, error) {
	p.maybePanic("RecentDedupe")
	return p.Store.RecentDedupe(ctx, since, now, limit)
}

// countPanics is a PanicMetrics that counts by where.
type countPanics struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countPanics) Panic(where string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[where]++
}

func (c *countPanics) get(where string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[where]
}

// panicLines are the log's lines with message msg, decoded, from byte
// from of the log on.
func panicLines(t *testing.T, logs *testkit.SyncBuffer, msg string, from ...int) []map[string]any {
	t.Helper()
	text := logs.String()
	if len(from) > 0 {
		text = text[from[0]:]
	}
	var out []map[string]any
	for _, l := range strings.Split(text, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// wantPanicLine checks a recovered panic's log line: ERROR, the value's
// type and a description without its text, the stack of the panic.
func wantPanicLine(t *testing.T, m map[string]any, inStack string) {
	t.Helper()
	line, _ := json.Marshal(m)
	switch {
	case m["level"] != "ERROR" || m["panic_type"] != "string":
		t.Errorf("panic line without ERROR level or the value's type: %s", line)
	case strings.Contains(string(line), "panic-detail"):
		t.Errorf("the panic's value reached the log: %s", line)
	case !strings.Contains(m["panic"].(string), "value withheld"):
		t.Errorf("panic line without its description: %s", line)
	case !strings.Contains(m["stack"].(string), inStack):
		t.Errorf("panic line without the stack of the panic (%s): %s", inStack, line)
	}
}

// A panic in a handler other than the chat and Responses edges (review
// polls, the reviewer API, /metrics) answers 500 server_error/
// internal_error with the request id and no detail, logs one line with
// the request id, the type, a description without the value and the
// stack, and is counted; after the response began, the connection is
// closed. The server goes on serving. (Before: net/http recovered the
// panic, the client saw the connection drop, and nothing in contractd's
// log or metrics recorded it.)
func TestHandlerPanicAnswers500(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	logs := &testkit.SyncBuffer{}
	h.srv.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	pm := &countPanics{}
	h.srv.Panics = pm
	dir := t.TempDir()
	st, err := review.OpenSQLite(context.Background(), filepath.Join(dir, "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ps := &panicStore{Store: st, panicIn: map[string]int{"Get": 1, "List": 1}}
	h.srv.Reviews = NewReviewQueue(context.Background(), func(context.Context) (review.Store, error) { return ps, nil },
		filepath.Join(dir, "review-spool.jsonl"), nil)
	var started atomic.Bool
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if started.Load() {
			w.WriteHeader(200)
			_, _ = io.WriteString(w, "# TYPE partial counter\n")
			http.NewResponseController(w).Flush()
		}
		panic(panicMarker)
	})
	front := httptest.NewServer(h.srv.Handler(&Admin{Metrics: metrics, Reviews: h.srv.ReviewAdmin()}))
	t.Cleanup(front.Close)

	id := reviewID(t, h.post("", failBody))
	for _, c := range []struct{ path, stack string }{
		{"/v1/reviews/" + id, "(*panicStore).Get"},
		{"/admin/reviews", "(*panicStore).List"},
		{"/metrics", "TestHandlerPanicAnswers500"},
	} {
		from := len(logs.String())
		r := send(t, h.client, "GET", front.URL+c.path, "", clientKey)
		wantError(t, r, http.StatusInternalServerError, typeServer, CodeInternal, nil)
		if strings.Contains(string(r.Body), "panic-detail") || strings.Contains(string(r.Body), "goroutine") {
			t.Errorf("%s: the 500 shows internal detail: %s", c.path, r.Body)
		}
		rid := wantRequestID(t, r)
		lines := panicLines(t, logs, "panic serving request", from)
		if len(lines) != 1 {
			t.Fatalf("%s: %d panic lines, want 1:\n%s", c.path, len(lines), logs)
		}
		wantPanicLine(t, lines[0], c.stack)
		if lines[0]["request_id"] != rid || lines[0]["method"] != "GET" {
			t.Errorf("%s: panic line without the request id %s or the method: %v", c.path, rid, lines[0])
		}
	}
	if n := pm.get(PanicHandler); n != 3 {
		t.Errorf("contractd_panics_total{where=handler} %d, want 3", n)
	}

	// After the response began: the connection is closed, not a second
	// answer written into the first.
	started.Store(true)
	from := len(logs.String())
	req, _ := http.NewRequest("GET", front.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := h.client.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Error("a panic after the response began: the response ended cleanly")
	}
	if n := len(panicLines(t, logs, "panic serving request", from)); n != 1 {
		t.Errorf("a panic after the response began logged %d lines, want 1", n)
	}

	// The server goes on serving, and the store answers again.
	if r := send(t, h.client, "GET", front.URL+"/v1/reviews/"+id, "", clientKey); r.Status != 200 {
		t.Errorf("after the panics: status %d %s", r.Status, r.Body)
	}
}

// A panic in the review queue's background loop (retention), the webhook
// worker (claiming deliveries) or the dedupe sync is logged with its
// stack, counted, and the task runs again after a backoff instead of
// ending the process: the spool still drains into the store, the
// delivery is still made. (Before: the panic ended the process.)
func TestBackgroundPanicRestartsTask(t *testing.T) {
	panics.BackoffMin, panics.BackoffMax = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() { panics.BackoffMin, panics.BackoffMax = time.Second, time.Minute })
	dir := t.TempDir()
	st, err := review.OpenSQLite(context.Background(), filepath.Join(dir, "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ps := &panicStore{Store: st, panicIn: map[string]int{"DeleteResolvedBefore": 1, "ClaimDeliveries": 1, "RecentDedupe": 1}}
	var delivered atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered.Add(1)
		w.WriteHeader(204)
	}))
	t.Cleanup(hook.Close)

	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	h := newHarness(t, always(invalidAnswer), cfg{})
	h.srv.Logger = log
	pm := &countPanics{}
	h.srv.Panics = pm
	q := NewReviewQueueOpenedByRun(func(context.Context) (review.Store, error) { return ps, nil }, filepath.Join(dir, "review-spool.jsonl"), log)
	q.Retry, q.Retention, q.Webhook, q.Panics = 10*time.Millisecond, time.Hour, true, pm
	h.srv.Reviews = q

	// An item waits in the spool: the store is not open before Run.
	id := reviewID(t, h.post("", failBody))
	if !q.Spool.Pending() {
		t.Fatal("premise: the item is not in the spool")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); q.Run(ctx) }()
	go func() { defer wg.Done(); q.RunWebhook(ctx, &Webhook{URL: hook.URL, Secret: []byte("s")}) }()
	go func() { defer wg.Done(); h.srv.SyncDedupe(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); wg.Wait() }()

	done := func() bool {
		it, err := st.Get(context.Background(), id)
		return err == nil && it.ID == id && !q.Spool.Pending() && delivered.Load() > 0 &&
			pm.get(PanicReviewQueue) == 1 && pm.get(PanicWebhook) == 1 && pm.get(PanicDedupeSync) == 1
	}
	for end := time.Now().Add(5 * time.Second); !done() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if !done() {
		t.Fatalf("after the panics: spool pending %v, %d deliveries, panics counted %v\n%s", q.Spool.Pending(), delivered.Load(), pm.n, logs)
	}
	lines := panicLines(t, logs, "panic in background task; restarting it")
	tasks := map[any]map[string]any{}
	for _, m := range lines {
		tasks[m["task"]] = m
	}
	for task, stack := range map[string]string{
		PanicReviewQueue: "(*panicStore).DeleteResolvedBefore",
		PanicWebhook:     "(*panicStore).ClaimDeliveries",
		PanicDedupeSync:  "(*panicStore).RecentDedupe",
	} {
		if m, ok := tasks[task]; !ok {
			t.Errorf("no panic line for %s:\n%s", task, logs)
		} else {
			wantPanicLine(t, m, stack)
		}
	}
}

// A store write that failed with a panic the store's writer recovered
// (a *panics.Error) spools the item like any failed write, and the panic
// is logged with its stack and counted.
func TestWriterPanicSpools(t *testing.T) {
	dir := t.TempDir()
	logs := &testkit.SyncBuffer{}
	pm := &countPanics{}
	q := NewReviewQueue(context.Background(), func(context.Context) (review.Store, error) { return writerPanicStore{}, nil },
		filepath.Join(dir, "review-spool.jsonl"), slog.New(slog.NewJSONHandler(logs, nil)))
	q.Panics = pm
	it := &review.Item{ID: "req_writerpanic", Route: "r", CreatedAt: time.Now()}
	if !q.save(context.Background(), it) {
		t.Fatal("the item is not durable")
	}
	if got, ok := q.Spool.Get(it.ID); !ok || got.ID != it.ID {
		t.Fatal("the item is not in the spool")
	}
	lines := panicLines(t, logs, "panic in the review store's writer; spooling")
	if len(lines) != 1 || pm.get(PanicReviewWriter) != 1 {
		t.Fatalf("%d lines, %d counted:\n%s", len(lines), pm.get(PanicReviewWriter), logs)
	}
	wantPanicLine(t, lines[0], "writerPanicStore.Create")
	if lines[0]["review_id"] != it.ID {
		t.Errorf("line without the review id: %v", lines[0])
	}
}

// writerPanicStore's Create fails as a writer that recovered a panic does.
type writerPanicStore struct{ review.Store }

func (writerPanicStore) Create(context.Context, *review.Item, bool) (created bool, err error) {
	defer func() { err = panics.New(recover()) }()
	panic(panicMarker)
}

func (writerPanicStore) Close() error { return nil }
