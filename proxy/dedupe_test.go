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
