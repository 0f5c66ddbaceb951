package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
)

const failBody = `{"model":"free","messages":[` + userHi + `]}`

func reviewID(t *testing.T, r *result) string {
	t.Helper()
	if r.Status != 422 {
		t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
	}
	return r.errorObj()["review"].(map[string]any)["id"].(string)
}

// An identical repeat of a needs_review request gets the same 422 (same
// review, same message) without an upstream call, marked and audited.
func TestDedupeRepeatServesSameReview(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	first := h.post("", failBody)
	id := reviewID(t, first)
	if first.Header.Get("X-Contract-Deduplicated") != "" {
		t.Error("the first 422 is marked deduplicated")
	}
	second := h.post("", failBody)
	if got := reviewID(t, second); got != id {
		t.Fatalf("review id %s, want %s", got, id)
	}
	if h.up.Hits() != 2 {
		t.Fatalf("upstream hits %d, want 2 (one run of 2 attempts)", h.up.Hits())
	}
	for k, want := range map[string]string{"X-Contract-Deduplicated": "true", "X-Should-Retry": "false", "X-Contract-Route": "free", "X-Contract-Attempts": "2"} {
		if got := second.Header.Get(k); got != want {
			t.Errorf("%s %q, want %q", k, got, want)
		}
	}
	reqID := wantRequestID(t, second)
	if reqID == id {
		t.Error("the repeat kept the first request's id")
	}
	if a, b := first.errorObj(), second.errorObj(); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("bodies differ:\n%v\n%v", a, b)
	}
	ev := h.sink.waitEvent(t, reqID)
	if ev.Outcome != audit.OutcomeNeedsReview || ev.Status != 422 || !ev.Deduplicated || ev.ReviewID != id || len(ev.Attempts) != 0 || ev.ErrorCode != string(CodeContractViolation) {
		t.Errorf("audit %+v", ev)
	}
	if ev := h.sink.waitEvent(t, id); ev.Deduplicated || ev.ReviewID != "" {
		t.Errorf("first audit %+v", ev)
	}
}

// What is not the same request runs again: another body, another client
// key, another edge.
func TestDedupeKeyParts(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	id := reviewID(t, h.post("", failBody))
	others := []*result{
		h.post("", `{"model":"free","messages":[{"role":"user","content":"hi!"}]}`),
		h.post("", failBody, "Authorization: Bearer client-key-2"),
		h.post("", ` `+failBody),
		h.post(respPath, `{"model":"free","input":"hi"}`),
	}
	for i, r := range others {
		if got := reviewID(t, r); got == id || r.Header.Get("X-Contract-Deduplicated") != "" {
			t.Errorf("request %d was served the first verdict", i)
		}
	}
	if h.up.Hits() != 2*(1+len(others)) {
		t.Errorf("upstream hits %d", h.up.Hits())
	}
	// The route chosen by path is the same route: a repeat.
	if r := h.post("/r/free/v1/chat/completions", failBody); reviewID(t, r) != id {
		t.Error("the /r/ path is not the same request")
	}
}

// Only needs_review verdicts are kept: a valid answer and an upstream
// error run again.
func TestDedupeKeepsOnlyNeedsReview(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		h := newHarness(t, always(validAnswer), cfg{})
		for i := 0; i < 2; i++ {
			if r := h.post("", failBody); r.Status != 200 || r.Header.Get("X-Contract-Deduplicated") != "" {
				t.Fatalf("status %d %v", r.Status, r.Header)
			}
		}
		if h.up.Hits() != 2 {
			t.Errorf("upstream hits %d, want 2", h.up.Hits())
		}
	})
	t.Run("upstream error", func(t *testing.T) {
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 400, []byte(`{"error":{"message":"no"}}`))
		}, cfg{})
		for i := 0; i < 2; i++ {
			if r := h.post("", failBody); r.Status != 502 {
				t.Fatalf("status %d %s", r.Status, r.Body)
			}
		}
		if h.up.Hits() != 2 {
			t.Errorf("upstream hits %d, want 2", h.up.Hits())
		}
	})
	t.Run("window 0", func(t *testing.T) {
		h := newHarness(t, always(invalidAnswer), cfg{})
		rt := *h.rt
		rt.Review.DedupeWindow = 0
		h.srv.Swap(&rt)
		if a, b := reviewID(t, h.post("", failBody)), reviewID(t, h.post("", failBody)); a == b || h.up.Hits() != 4 {
			t.Errorf("ids %s %s, upstream hits %d", a, b, h.up.Hits())
		}
	})
}

// The window ends: after it the request runs again.
func TestDedupeWindowExpires(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	var mu sync.Mutex
	now := time.Now()
	h.srv.dedupe.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	id := reviewID(t, h.post("", failBody))
	advance(59 * time.Second)
	if got := reviewID(t, h.post("", failBody)); got != id {
		t.Fatalf("inside the window: %s, want %s", got, id)
	}
	advance(2 * time.Second)
	if got := reviewID(t, h.post("", failBody)); got == id || h.up.Hits() != 4 {
		t.Fatalf("after the window: id %s (first %s), upstream hits %d", got, id, h.up.Hits())
	}
}

// Identical requests at once: one runs, the others wait for its verdict;
// never two upstream runs.
func TestDedupeConcurrentIdentical(t *testing.T) {
	gate := make(chan struct{})
	// The first call is held until the others arrive: 100 ms and more
	// under load, past the harness's 200 ms per-call timeout, whose
	// transport retry would be a third hit (a held call was seen cancelled
	// at 194-260 ms and retried at load 8). The request deadline (5 s)
	// still bounds the test.
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		<-gate
		reply(w, 200, completion(invalidAnswer, "stop", 10, 5))
	}, cfg{UpTimeout: "5s"})
	const n = 8
	results := make([]*result, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { ; results[i] = h.post("", failBody) })
	}
	// Let every request reach the server before the upstream answers.
	deadline := time.Now().Add(5 * time.Second)
	for h.up.Hits() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	close(gate)
	wg.Wait()
	if h.up.Hits() != 2 {
		t.Fatalf("upstream hits %d, want 2 (one run)", h.up.Hits())
	}
	ids, dedup := map[string]bool{}, 0
	for _, r := range results {
		ids[reviewID(t, r)] = true
		if r.Header.Get("X-Contract-Deduplicated") == "true" {
			dedup++
		}
	}
	if len(ids) != 1 || dedup != n-1 {
		t.Errorf("%d review ids, %d deduplicated; want 1 and %d", len(ids), dedup, n-1)
	}
}

// Identical requests that pass run side by side: after one run of a body
// ends without a verdict, the next identical requests reach the upstream
// together instead of one at a time behind each other.
func TestDedupeIdenticalValidRunTogether(t *testing.T) {
	const n = 8
	var mu sync.Mutex
	inflight, peak := 0, 0
	all := make(chan struct{})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		if inflight == n {
			close(all)
		}
		mu.Unlock()
		if c.N > 1 { // the first request runs alone
			select {
			case <-all:
			case <-time.After(5 * time.Second):
			}
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		reply(w, 200, completion(validAnswer, "stop", 10, 5))
	}, cfg{})
	if r := h.post("", failBody); r.Status != 200 {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if r := h.post("", failBody); r.Status != 200 {
				t.Errorf("status %d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if peak != n {
		t.Errorf("at most %d identical requests at the upstream at once, want %d", peak, n)
	}
}

// A reload that changes the contract runs the identical request again; one
// that changes nothing of the route's prompt or contract does not.
func TestDedupeReload(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	id := reviewID(t, h.post("", failBody))
	h.reload(cfg{})
	if got := reviewID(t, h.post("", failBody)); got != id {
		t.Fatalf("same config: %s, want %s", got, id)
	}
	changed := strings.Replace(configYAML(h.up.URL(), cfg{}), "forbidden-word", "other-word", 1)
	rt := testkit.LoadRuntime(t, filepath.Join("testdata", "contractd.yaml"), changed)
	if rt.Routes["free"].Contract.SHA256 == h.rt.Routes["free"].Contract.SHA256 {
		t.Fatal("the edit did not change the contract")
	}
	h.srv.Swap(rt)
	r := h.post("", failBody)
	if got := reviewID(t, r); got == id || r.Header.Get("X-Contract-Deduplicated") != "" || h.up.Hits() != 4 {
		t.Fatalf("after the contract changed: id %s (first %s), upstream hits %d", got, id, h.up.Hits())
	}
}

// A flood of distinct failing bodies cannot grow the cache past its limit:
// the least recently used verdicts are evicted and counted.
func TestDedupeBounded(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	h.srv.dedupe = newDedupe(16)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Go(func() {
			for j := 0; j < 15; j++ {
				reviewID(t, h.post("", fmt.Sprintf(`{"model":"free","messages":[{"role":"user","content":"q %d-%d"}]}`, i, j)))
			}
		})
	}
	wg.Wait()
	entries, evictions := h.srv.DedupeStats()
	if entries != 16 || evictions != 60-16 {
		t.Fatalf("entries %d evictions %d, want 16 and 44", entries, evictions)
	}
	if len(h.srv.dedupe.items) != 16 || len(h.srv.dedupe.inflight) != 0 {
		t.Fatalf("map %d, inflight %d", len(h.srv.dedupe.items), len(h.srv.dedupe.inflight))
	}
}

func TestDedupeUnit(t *testing.T) {
	d := newDedupe(2)
	k := func(s string) dedupeKey { return newDedupeKey("c", "chat", "r", []byte(s), "p", "k") }
	if newDedupeKey("ab", "c", "r", nil, "p", "k") == newDedupeKey("a", "bc", "r", nil, "p", "k") {
		t.Fatal("key parts run together")
	}
	verdict := &APIError{Status: 422}
	hit, rel, err := d.acquire(context.Background(), k("a"))
	if hit != nil || rel == nil || err != nil {
		t.Fatal("first acquire does not run")
	}
	// A waiter gives up when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := d.acquire(ctx, k("a")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter: %v", err)
	}
	rel(verdict, time.Minute)
	rel(nil, 0) // a second release is a no-op
	if hit, _, _ := d.acquire(context.Background(), k("a")); hit != verdict {
		t.Fatal("verdict not kept")
	}
	// Not kept: the next identical request runs.
	_, rel, _ = d.acquire(context.Background(), k("b"))
	rel(nil, time.Minute)
	if hit, rel, _ := d.acquire(context.Background(), k("b")); hit != nil || rel == nil {
		t.Fatal("a run without a verdict was kept")
	} else {
		rel(verdict, time.Minute)
	}
	// LRU: "a" was used after "b" was stored; "c" evicts "b".
	d.acquire(context.Background(), k("a"))
	_, rel, _ = d.acquire(context.Background(), k("c"))
	rel(verdict, time.Minute)
	if e, ev := d.stats(); e != 2 || ev != 1 {
		t.Fatalf("entries %d evictions %d", e, ev)
	}
	if hit, _, _ := d.acquire(context.Background(), k("a")); hit != verdict {
		t.Fatal("the recently used entry was evicted")
	}
}

// After a run without a verdict, identical requests skip the wait, and
// each other's waiters all run at once; the mark lasts dedupeClearFor and
// the marks are bounded.
func TestDedupeClearMark(t *testing.T) {
	d := newDedupe(10)
	var mu sync.Mutex
	now := time.Now()
	d.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	k := func(s string) dedupeKey { return newDedupeKey("c", "chat", "r", []byte(s), "p", "k") }
	verdict := &APIError{Status: 422}

	// Waiters of a run that ends without a verdict all run, at once.
	_, rel, _ := d.acquire(context.Background(), k("w"))
	ran := make(chan func(*APIError, time.Duration), 3)
	for range 3 {
		go func() {
			_, r, _ := d.acquire(context.Background(), k("w"))
			ran <- r
		}()
	}
	time.Sleep(20 * time.Millisecond)
	rel(nil, time.Minute)
	var rels []func(*APIError, time.Duration)
	for range 3 {
		select {
		case r := <-ran:
			if r == nil {
				t.Fatal("a waiter got no run")
			}
			rels = append(rels, r)
		case <-time.After(5 * time.Second):
			t.Fatal("waiters ran one at a time")
		}
	}
	// A verdict from one of them is kept and served.
	rels[0](verdict, time.Minute)
	rels[1](nil, time.Minute)
	rels[2](nil, time.Minute)
	if hit, _, _ := d.acquire(context.Background(), k("w")); hit != verdict {
		t.Fatal("a verdict from a side-by-side run was not kept")
	}
	// Marked clear: two identical requests both run, neither waits.
	_, rel, _ = d.acquire(context.Background(), k("v"))
	rel(nil, time.Minute)
	_, r1, _ := d.acquire(context.Background(), k("v"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if hit, r2, err := d.acquire(ctx, k("v")); hit != nil || r2 == nil || err != nil {
		t.Fatalf("second side-by-side run: %v %v", hit, err)
	} else {
		r2(nil, time.Minute)
	}
	r1(nil, time.Minute)
	// The mark ends: the first request after it runs registered again, and
	// an identical one waits for it.
	mu.Lock()
	now = now.Add(dedupeClearFor + time.Second)
	mu.Unlock()
	_, rel, _ = d.acquire(context.Background(), k("v"))
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, _, err := d.acquire(short, k("v")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the mark ended an identical request did not wait: %v", err)
	}
	rel(nil, time.Minute)
	// Bounded: marks past dedupeClearMax replace others.
	for i := range dedupeClearMax + 10 {
		_, rel, _ := d.acquire(context.Background(), k(fmt.Sprint("m", i)))
		rel(nil, time.Minute)
	}
	d.mu.Lock()
	n := len(d.clear)
	d.mu.Unlock()
	if n > dedupeClearMax {
		t.Fatalf("%d clear marks, want at most %d", n, dedupeClearMax)
	}
}

// Verdicts whose window has ended, and clear marks past their time, are
// dropped (within dedupeSweepEvery, at the next verdict, mark or scrape),
// not kept until DedupeMaxEntries of them push each other out. Before, a
// verdict went only when an identical request came after its window: the
// session 14 soak (distinct failing bodies, a 20 s window) held every one
// of its 1,834 verdicts at the end, each a 422 body's worth of memory, on
// the way to 10,000.
func TestDedupeExpiredDropped(t *testing.T) {
	d := newDedupe(DedupeMaxEntries)
	var mu sync.Mutex
	now := time.Now()
	d.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(by time.Duration) { mu.Lock(); now = now.Add(by); mu.Unlock() }
	held := func() (verdicts, marks int) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.items) != d.lru.Len() {
			t.Fatalf("map %d, list %d", len(d.items), d.lru.Len())
		}
		return d.lru.Len(), len(d.clear)
	}
	k := func(i int) dedupeKey { return newDedupeKey("c", "chat", "r", fmt.Appendf(nil, "body %d", i), "p", "k") }
	verdict := &APIError{Status: 422}
	ctx := context.Background()
	for i := range 500 {
		_, rel, _ := d.acquire(ctx, k(i))
		rel(verdict, 20*time.Second)
	}
	for i := 500; i < 1000; i++ { // valid answers: clear marks
		_, rel, _ := d.acquire(ctx, k(i))
		rel(nil, 20*time.Second)
	}
	d.learn(k(2000), verdict, now.Add(time.Minute)) // from the store, a longer window
	if v, m := held(); v != 501 || m != 500 {
		t.Fatalf("held %d verdicts, %d marks; want 501, 500", v, m)
	}
	advance(21 * time.Second)
	// A scrape sweeps: only the learned verdict is still inside its window.
	if e, ev := d.stats(); e != 1 || ev != 0 {
		t.Fatalf("after the window: %d entries, %d evictions; want 1, 0", e, ev)
	}
	if v, m := held(); v != 1 || m != 0 {
		t.Fatalf("after the window: %d verdicts, %d marks held; want 1, 0", v, m)
	}
	if hit, _, _ := d.acquire(ctx, k(2000)); hit != verdict {
		t.Fatal("the verdict still inside its window was dropped")
	}
	// Without a scrape, a new verdict sweeps too, once dedupeSweepEvery
	// has passed since the last sweep.
	advance(time.Minute)
	_, rel, _ := d.acquire(ctx, k(3000))
	rel(verdict, 20*time.Second)
	if v, _ := held(); v != 1 {
		t.Fatalf("after a new verdict: %d held, want 1 (the new one)", v)
	}
	// Within dedupeSweepEvery nothing is walked again: a burst of verdicts
	// costs one walk a second.
	advance(21 * time.Second)
	d.mu.Lock()
	d.swept = now
	d.mu.Unlock()
	_, rel, _ = d.acquire(ctx, k(3001))
	rel(verdict, 20*time.Second)
	if v, _ := held(); v != 2 {
		t.Fatalf("swept again within %v: %d held, want 2", dedupeSweepEvery, v)
	}
}

// The server's gauge (DedupeStats, contractd_dedupe_entries) falls back to
// 0 once the windows of distinct needs_review answers have ended.
func TestDedupeEntriesFallAfterWindow(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	var mu sync.Mutex
	now := time.Now()
	h.srv.dedupe.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	for i := range 20 {
		reviewID(t, h.post("", fmt.Sprintf(`{"model":"free","messages":[{"role":"user","content":"hi %d"}]}`, i)))
	}
	if n, _ := h.srv.DedupeStats(); n != 20 {
		t.Fatalf("%d entries after 20 distinct needs_review answers, want 20", n)
	}
	mu.Lock()
	now = now.Add(h.srv.Runtime().Review.DedupeWindow + time.Second)
	mu.Unlock()
	if n, ev := h.srv.DedupeStats(); n != 0 || ev != 0 {
		t.Fatalf("after the window: %d entries, %d evictions; want 0, 0", n, ev)
	}
}
