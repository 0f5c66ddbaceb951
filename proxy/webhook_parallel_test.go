package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/panics"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

// hookStores open an empty store of each kind the webhook worker runs on,
// closed when the test ends.
var hookStores = []struct {
	name string
	open func(t testing.TB) review.Store
}{
	{"sqlite", func(t testing.TB) review.Store {
		st, err := review.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "reviews.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"postgres", func(t testing.TB) review.Store {
		st, err := review.OpenPostgres(context.Background(), testkit.PostgresDSN(t), review.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// leakCheckClosing is noLeaks for a test whose store opened first (the
// store's own goroutines are in the count, and on a first use so is the
// shared PostgreSQL server's): the store is closed before the check, so a
// goroutine its driver starts during the test and keeps while open (pgx's
// background reader on a pooled connection) is not taken for a leak.
func leakCheckClosing(t *testing.T, st review.Store) {
	t.Helper()
	check := noLeaks(t)
	t.Cleanup(func() {
		st.Close()
		check()
	})
}

var hookItems atomic.Int64 // fillOutbox's items so far, for their ids

// fillOutbox makes n items, each created and resolved, so the outbox holds
// 2n deliveries: review.created and review.resolved of each.
func fillOutbox(t testing.TB, st review.Store, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		id := fmt.Sprintf("req_hook%04d", hookItems.Add(1))
		if _, err := st.Create(ctx, storetest.NewItem(id, "classify", time.Now()), true); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Resolve(ctx, id, review.Resolve{Status: review.StatusRejected, At: time.Now(),
			Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "ann"}, Webhook: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// hookQueue is a queue over st for calling deliver directly.
func hookQueue(t testing.TB, st review.Store, log *slog.Logger) *ReviewQueue {
	return NewReviewQueueOpenedByRun(func(context.Context) (review.Store, error) { return st, nil },
		filepath.Join(t.TempDir(), "review-spool.jsonl"), log)
}

// slowReceiver answers 204 after delay, counting the posts in flight at
// once and checking that a review's review.resolved is posted only after
// its review.created was answered. With gather set, its first gather posts
// are held until all of them are in flight (or 10 s pass): the deliveries
// being parallel is then shown by the count, whatever the machine's load,
// not by a time bound.
type slowReceiver struct {
	t        *testing.T
	delay    time.Duration
	gather   int32
	arrived  atomic.Int32
	all      chan struct{} // closed when gather posts have arrived
	inFlight atomic.Int32
	most     atomic.Int32 // the most posts in flight at once
	mu       sync.Mutex
	answered map[string]bool // review id -> its review.created answered
	posts    int
}

func (s *slowReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	if a := s.arrived.Add(1); a <= s.gather {
		if a == s.gather {
			close(s.all)
		}
		select {
		case <-s.all:
		case <-time.After(10 * time.Second):
			s.t.Errorf("post %d of the first %d waited 10 s for the others: the posts are not parallel", a, s.gather)
		}
	}
	var ev struct {
		Type   string `json:"type"`
		Review struct {
			ID string `json:"id"`
		} `json:"review"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &ev); err != nil {
		s.t.Errorf("body: %v", err)
	}
	s.mu.Lock()
	s.posts++
	if ev.Type == string(review.EventResolved) && !s.answered[ev.Review.ID] {
		s.t.Errorf("%s: review.resolved posted before review.created was answered", ev.Review.ID)
	}
	s.mu.Unlock()
	time.Sleep(s.delay)
	if ev.Type == string(review.EventCreated) {
		s.mu.Lock()
		s.answered[ev.Review.ID] = true
		s.mu.Unlock()
	}
	w.WriteHeader(204)
}

// A claimed batch is posted Parallel posts at a time (8 by default), a
// review's deliveries one after another in claim order: with a receiver
// that takes 200 ms, 32 deliveries (16 reviews, created and resolved) go
// out in about 0.8 s, exactly 8 posts in flight at most (the receiver
// holds the first 8 until all are there). Before, one at a time: 6.4 s.
func TestWebhookPostsInParallel(t *testing.T) {
	const delay, reviews = 200 * time.Millisecond, 16
	for _, store := range hookStores {
		for _, parallel := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/parallel=%d", store.name, parallel), func(t *testing.T) {
				st := store.open(t)
				leakCheckClosing(t, st)
				fillOutbox(t, st, reviews)
				want := parallel
				if want == 0 {
					want = webhookParallel
				}
				rcv := &slowReceiver{t: t, delay: delay, gather: int32(want), all: make(chan struct{}), answered: map[string]bool{}}
				hook := httptest.NewServer(rcv)
				defer hook.Close()
				wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Backoff: time.Hour, MaxAge: time.Hour,
					Timeout: 10 * time.Second, Lease: time.Minute, Parallel: parallel, Client: &http.Client{}}
				defer wh.Client.CloseIdleConnections()
				start := time.Now()
				hookQueue(t, st, nil).deliver(context.Background(), st, wh)
				took := time.Since(start)
				t.Logf("%d deliveries in %v, at most %d posts in flight", 2*reviews, took, rcv.most.Load())

				if m := rcv.most.Load(); m != int32(want) {
					t.Errorf("%d posts in flight at most, want %d", m, want)
				}
				if rcv.posts != 2*reviews {
					t.Errorf("%d posts, want %d", rcv.posts, 2*reviews)
				}
				if ds, _ := st.ClaimDeliveries(context.Background(), time.Now().Add(2*time.Hour), 100, 0); len(ds) != 0 {
					t.Errorf("%d deliveries left in the outbox", len(ds))
				}
			})
		}
	}
}

// Cancelling the worker's context ends a batch posted to a hung receiver
// at once: the posts in flight end, none starts, no goroutine is left.
func TestWebhookBatchEndsWithContext(t *testing.T) {
	st := hookStores[0].open(t)
	leakCheckClosing(t, st)
	fillOutbox(t, st, 16)
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		io.Copy(io.Discard, r.Body)
		select { // hung until the post is cancelled
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer hook.Close()
	wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Backoff: time.Hour, MaxAge: time.Hour,
		Timeout: 10 * time.Second, Lease: time.Minute, Client: &http.Client{}}
	defer wh.Client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hookQueue(t, st, nil).deliver(ctx, st, wh); close(done) }()
	for deadline := time.Now().Add(5 * time.Second); posts.Load() < webhookParallel && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("deliver went on 2 s after its context ended")
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("deliver ended %v after its context", took)
	}
	if n := posts.Load(); n != webhookParallel {
		t.Errorf("%d posts, want the %d in flight when the context ended", n, webhookParallel)
	}
}

// panicFinish panics (with panicMarker) in its first FinishDelivery.
type panicFinish struct {
	review.Store
	left atomic.Int32
}

func (p *panicFinish) FinishDelivery(ctx context.Context, id string, done bool, retryAt time.Time) error {
	if p.left.Add(-1) >= 0 {
		panic(panicMarker)
	}
	return p.Store.FinishDelivery(ctx, id, done, retryAt)
}

// A panic in one of a batch's posts is logged with its own stack and
// counted, and the worker restarts: the delivery it was finishing is
// posted again when its lease ends, the rest are delivered.
func TestWebhookPostPanicRestartsWorker(t *testing.T) {
	panics.BackoffMin, panics.BackoffMax = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() { panics.BackoffMin, panics.BackoffMax = time.Second, time.Minute })
	st := hookStores[0].open(t)
	leakCheckClosing(t, st)
	fillOutbox(t, st, 4)
	ps := &panicFinish{Store: st}
	ps.left.Store(1)
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(204)
	}))
	defer hook.Close()
	logs := &testkit.SyncBuffer{}
	q := NewReviewQueue(context.Background(), func(context.Context) (review.Store, error) { return ps, nil },
		filepath.Join(t.TempDir(), "review-spool.jsonl"), slog.New(slog.NewJSONHandler(logs, nil)))
	pm := &countPanics{}
	q.Retry, q.Panics = 10*time.Millisecond, pm
	wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Timeout: 100 * time.Millisecond, Lease: 300 * time.Millisecond, Client: &http.Client{}}
	defer wh.Client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.RunWebhook(ctx, wh); close(done) }()
	for deadline := time.Now().Add(5 * time.Second); posts.Load() < 9 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the last finish land, and a tenth post show
	cancel()
	<-done
	if ds, _ := st.ClaimDeliveries(context.Background(), time.Now().Add(2*time.Hour), 100, 0); len(ds) != 0 {
		t.Errorf("%d deliveries left", len(ds))
	}
	if n := posts.Load(); n != 9 {
		t.Errorf("%d posts, want 9 (8 deliveries, the one whose finish panicked twice)", n)
	}
	lines := panicLines(t, logs, "panic in background task; restarting it")
	if len(lines) != 1 || pm.get(PanicWebhook) != 1 {
		t.Fatalf("%d panic lines, %d counted; want 1:\n%s", len(lines), pm.get(PanicWebhook), logs)
	}
	wantPanicLine(t, lines[0], "(*panicFinish).FinishDelivery")
}

// BenchmarkWebhookDeliveries is deliveries a second from one worker over
// SQLite to a receiver that takes 100 ms an answer (docs/review.md).
func BenchmarkWebhookDeliveries(b *testing.B) {
	const delay, reviews = 100 * time.Millisecond, 32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.WriteHeader(204)
	}))
	defer hook.Close()
	st := hookStores[0].open(b)
	q := hookQueue(b, st, nil)
	wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Backoff: time.Hour, MaxAge: time.Hour,
		Timeout: 10 * time.Second, Lease: time.Minute, Client: &http.Client{}}
	defer wh.Client.CloseIdleConnections()
	var took time.Duration
	for range b.N {
		b.StopTimer()
		fillOutbox(b, st, reviews)
		b.StartTimer()
		start := time.Now()
		q.deliver(context.Background(), st, wh)
		took += time.Since(start)
	}
	b.ReportMetric(float64(2*reviews*b.N)/took.Seconds(), "deliveries/s")
}
