package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

// lookupFaultStore fails RecentDedupe while fail is set.
type lookupFaultStore struct {
	review.Store
	fail atomic.Bool
}

func (f *lookupFaultStore) RecentDedupe(ctx context.Context, since, now time.Time, limit int) ([]review.DedupeRecord, error) {
	if f.fail.Load() {
		return nil, errors.New("connection refused (injected)")
	}
	return f.Store.RecentDedupe(ctx, since, now, limit)
}

// sync runs one read of h's dedupe sync (SyncDedupe runs them on a ticker).
func syncDedupe(t *testing.T, y *dedupeSync) {
	t.Helper()
	if err := y.once(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// replica is one Server with its own store handle on a shared file, as two
// processes sharing a review store are.
func replica(t *testing.T, up *fakeUpstream, file string) (*harness, *lookupFaultStore, *testkit.SyncBuffer) {
	t.Helper()
	h := newHarnessOn(t, up, cfg{})
	st, err := review.OpenSQLite(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	fs := &lookupFaultStore{Store: st}
	t.Cleanup(func() { st.Close() })
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	h.srv.Reviews = NewReviewQueue(context.Background(), func(context.Context) (review.Store, error) { return fs, nil },
		filepath.Join(filepath.Dir(file), "review-spool.jsonl"), log)
	return h, fs, logs
}

// A repeat on another replica sharing the review store, once that replica
// has read the store, gets the same 422 (same review, same body) without
// an upstream call; what is not the same request (another key, another
// contract after a reload) runs.
func TestDedupeAcrossReplicas(t *testing.T) {
	up := newFakeUpstream(t, always(invalidAnswer))
	file := filepath.Join(t.TempDir(), "reviews.db")
	a, _, _ := replica(t, up, file)
	b, _, _ := replica(t, up, file)
	bsync := &dedupeSync{s: b.srv}
	syncDedupe(t, bsync) // b starts reading before a's verdict, as a running replica does

	first := a.post("", failBody)
	id := reviewID(t, first)
	if rv := first.errorObj()["review"].(map[string]any); rv["stored"] != true {
		t.Fatalf("review %v", rv)
	}
	syncDedupe(t, bsync)
	second := b.post("", failBody)
	if got := reviewID(t, second); got != id {
		t.Fatalf("replica b: review %s, want %s", got, id)
	}
	if up.Hits() != 2 {
		t.Fatalf("upstream hits %d, want 2 (one run on replica a)", up.Hits())
	}
	if !bytes.Equal(first.Body, second.Body) {
		t.Errorf("bodies differ:\n%s\n%s", first.Body, second.Body)
	}
	for k, want := range map[string]string{"X-Contract-Deduplicated": "true", "X-Should-Retry": "false", "X-Contract-Route": "free", "X-Contract-Attempts": "2"} {
		if got := second.Header.Get(k); got != want {
			t.Errorf("%s %q, want %q", k, got, want)
		}
	}
	ev := b.sink.waitEvent(t, wantRequestID(t, second))
	if ev.Outcome != audit.OutcomeNeedsReview || !ev.Deduplicated || ev.ReviewID != id || len(ev.Attempts) != 0 {
		t.Errorf("audit on b %+v", ev)
	}
	// Replica b now holds it in memory too: the first level answers.
	if e, _ := b.srv.DedupeStats(); e != 1 {
		t.Errorf("replica b memory entries %d, want 1", e)
	}

	if r := b.post("", failBody, "Authorization: Bearer client-key-2"); reviewID(t, r) == id {
		t.Error("another client key was served the verdict")
	}
	changed := strings.Replace(configYAML(up.URL(), cfg{}), "forbidden-word", "other-word", 1)
	c := testkit.LoadRuntime(t, filepath.Join("testdata", "contractd.yaml"), changed)
	bb, _, _ := replica(t, up, file)
	bb.srv.Swap(c)
	syncDedupe(t, &dedupeSync{s: bb.srv}) // a restarted replica learns the open windows
	hits := up.Hits()
	if r := bb.post("", failBody); reviewID(t, r) == id || r.Header.Get("X-Contract-Deduplicated") != "" || up.Hits() != hits+2 {
		t.Fatalf("after the contract changed: deduplicated, upstream hits %d", up.Hits()-hits)
	}
}

// The store's window is the verdict's: once it ends, no replica serves it.
// Both replicas read one fake clock.
func TestDedupeStoreWindowEnds(t *testing.T) {
	up := newFakeUpstream(t, always(invalidAnswer))
	file := filepath.Join(t.TempDir(), "reviews.db")
	a, _, _ := replica(t, up, file)
	b, _, _ := replica(t, up, file)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	a.srv.dedupe.now, b.srv.dedupe.now = clock, clock
	rt := *a.rt
	rt.Review.DedupeWindow = 10 * time.Second
	a.srv.Swap(&rt) // b keeps 60 s: the stored window is a's
	id := reviewID(t, a.post("", failBody))
	advance(9 * time.Second)
	syncDedupe(t, &dedupeSync{s: b.srv})
	if got := reviewID(t, b.post("", failBody)); got != id {
		t.Fatalf("inside the window: %s, want %s", got, id)
	}
	advance(2 * time.Second)
	// b's own memory copy expires with the stored window, not b's 60 s.
	if r := b.post("", failBody); reviewID(t, r) == id || up.Hits() != 4 {
		t.Fatalf("after the window: deduplicated, upstream hits %d", up.Hits())
	}
}

// A store the sync cannot read fails no request: repeats on the other
// replica run, the failure is logged once, not per read, and the sync
// catches up when the store answers again.
func TestDedupeSyncFails(t *testing.T) {
	up := newFakeUpstream(t, always(invalidAnswer))
	file := filepath.Join(t.TempDir(), "reviews.db")
	a, _, _ := replica(t, up, file)
	b, bs, logs := replica(t, up, file)
	bs.fail.Store(true)
	y := &dedupeSync{s: b.srv}
	id := reviewID(t, a.post("", failBody))
	for i := 0; i < 3; i++ {
		if err := y.once(context.Background()); err == nil {
			t.Fatal("sync read a failing store")
		} else {
			b.srv.Reviews.warnLookup(err)
		}
	}
	if got := reviewID(t, b.post("", failBody)); got == id {
		t.Fatal("served a verdict the store could not give")
	}
	if n := strings.Count(logs.String(), "dedupe sync failed"); n != 1 {
		t.Fatalf("%d sync warnings, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), clientKey) {
		t.Fatal("a client key in the log")
	}
	// Back: the next read learns a's verdict (b's own run made another
	// with a later window, which it keeps; another key shows a's arrives).
	bs.fail.Store(false)
	id2 := reviewID(t, a.post("", failBody, "Authorization: Bearer client-key-2"))
	syncDedupe(t, y)
	hits := up.Hits()
	if got := reviewID(t, b.post("", failBody, "Authorization: Bearer client-key-2")); got != id2 || up.Hits() != hits {
		t.Fatalf("after recovery: review %s (want %s), upstream hits %d", got, id2, up.Hits()-hits)
	}
}

// The sync reads what many processes wrote, in batches, whatever their
// creation order; and the valid path never waits on the store.
func TestDedupeSyncBatches(t *testing.T) {
	up := newFakeUpstream(t, always(invalidAnswer))
	file := filepath.Join(t.TempDir(), "reviews.db")
	a, as, _ := replica(t, up, file)
	b, _, _ := replica(t, up, file)
	answer := a.post("", failBody).Body // a real 422, served again as is
	now := time.Now()
	// More than a batch, written straight to the store as other replicas
	// would, some created before the newest (a slower commit).
	for i := range dedupeSyncBatch + 50 {
		k := newDedupeKey(clientKey, "chat", "free", []byte(fmt.Sprint(failBody, i)), "p", "c")
		it := storetest.NewItem(fmt.Sprint("it", i), "free", now.Add(-time.Duration(i%7)*time.Millisecond))
		it.Dedupe = &review.Dedupe{Key: k.String(), Until: now.Add(time.Minute), Answer: answer}
		if _, err := as.Create(context.Background(), it, false); err != nil {
			t.Fatal(err)
		}
	}
	syncDedupe(t, &dedupeSync{s: b.srv})
	if n, _ := b.srv.DedupeStats(); n != dedupeSyncBatch+51 {
		t.Fatalf("learned %d windows, want %d", n, dedupeSyncBatch+51)
	}
}

// BenchmarkDedupeStoreLookup shows the review store costs the valid path
// nothing for dedupe: review.store sqlite with dedupe_window 60s against
// window 0 (no dedupe at all) and store none (the memory alone); the
// store is read by SyncDedupe beside the requests, never by one. Handler
// called directly, one request at a time.
//
//	go test -run '^$' -bench DedupeStoreLookup -count 6 ./proxy/
func BenchmarkDedupeStoreLookup(b *testing.B) {
	up := testkit.NewUpstream(b, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, completion(validClassify, "stop", 10, 5))
	})
	up.SetQuiet(true)
	defer up.Close()
	for _, c := range []struct {
		name   string
		window time.Duration
		store  bool
	}{{"sqlite/window=0", 0, true}, {"none/window=60s", time.Minute, false}, {"sqlite/window=60s", time.Minute, true}} {
		b.Run(c.name, func(b *testing.B) {
			rt := loadRuntime(b, up.URL(), cfg{})
			rt.Review.DedupeWindow = c.window
			srv := NewServer(rt, NewCaller(testKeys), audit.NewWriter(io.Discard), nil)
			if c.store {
				q := sqliteQueue(b)
				defer q.Close()
				srv.Reviews = q
			}
			h := srv.Handler(nil)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(classifyReq))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("status %d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
