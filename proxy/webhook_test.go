package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

func TestWebhookAtLeastOnceSigned(t *testing.T) {
	rh := newReviewHarness(t)
	rh.q.Webhook = true
	type got struct {
		delivery, typ string
		status        string
	}
	var mu sync.Mutex
	var calls []got
	fails := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := hmac.New(sha256.New, []byte("hook-secret"))
		m.Write(body)
		if r.Header.Get("X-Contractd-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			t.Errorf("bad signature %q", r.Header.Get("X-Contractd-Signature"))
		}
		var ev struct {
			Type   string         `json:"type"`
			Review map[string]any `json:"review"`
		}
		json.Unmarshal(body, &ev)
		if _, has := ev.Review["request"]; has {
			t.Error("webhook review has request")
		}
		d := r.Header.Get("X-Contractd-Delivery")
		mu.Lock()
		calls = append(calls, got{d, ev.Type, ev.Review["status"].(string)})
		fails[d]++
		n := fails[d]
		mu.Unlock()
		if n < 3 { // the first two tries of each delivery fail
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(204)
	}))
	defer hook.Close()
	id := rh.needsReview(classifyReq)
	if r := rh.call("POST", "/admin/reviews/"+id+"/reject", `{"reviewer":"ann"}`, adminKey); r.Status != 200 {
		t.Fatalf("%s", r.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	wh := &Webhook{URL: hook.URL, Secret: []byte("hook-secret"), Backoff: 5 * time.Millisecond, Client: &http.Client{}}
	go func() { rh.q.RunWebhook(ctx, wh); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls %d", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the last acks land
	cancel()
	<-done
	wh.Client.CloseIdleConnections()
	if ds, _ := rh.store.ClaimDeliveries(context.Background(), time.Now().Add(2*time.Hour), 10, 0); len(ds) != 0 {
		t.Fatalf("%d deliveries left in the outbox", len(ds))
	}
	mu.Lock()
	defer mu.Unlock()
	types := map[string]string{}
	for _, c := range calls {
		types[c.delivery] = c.typ + "/" + c.status
	}
	if len(types) != 2 || len(calls) != 6 {
		t.Fatalf("calls %+v", calls)
	}
	seen := map[string]bool{}
	for _, v := range types {
		seen[v] = true
	}
	if !seen["review.created/pending"] || !seen["review.resolved/rejected"] {
		t.Fatalf("types %v", types)
	}
}

// A receiver that answers a redirect does not get the body sent on: the
// delivery stays pending and is retried at the configured URL.
func TestWebhookFollowsNoRedirect(t *testing.T) {
	rh := newReviewHarness(t)
	rh.q.Webhook = true
	var tries, other atomic.Int32
	away := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		w.WriteHeader(204)
	}))
	defer away.Close()
	codes := []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		i := tries.Add(1)
		w.Header().Set("Location", away.URL+"/stolen")
		w.WriteHeader(codes[(i-1)%3])
	}))
	defer hook.Close()
	rh.needsReview(classifyReq)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	wh := &Webhook{URL: hook.URL, Secret: []byte("hook-secret"), Backoff: time.Millisecond, Client: &http.Client{}}
	go func() { rh.q.RunWebhook(ctx, wh); close(done) }()
	// Three tries at the configured URL, each answered 3xx; a followed
	// redirect delivers elsewhere and ends the tries.
	for deadline := time.Now().Add(10 * time.Second); tries.Load() < 3 && other.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	wh.Client.CloseIdleConnections()
	if n := other.Load(); n != 0 {
		t.Fatalf("the redirect target got %d deliveries", n)
	}
	if n := tries.Load(); n < 3 {
		t.Fatalf("%d tries at the configured URL, want 3", n)
	}
	if ds, _ := rh.store.ClaimDeliveries(context.Background(), time.Now().Add(2*time.Hour), 10, 0); len(ds) != 1 {
		t.Fatalf("%d deliveries pending, want the one redirected", len(ds))
	}
}

// postDeadlines is a webhook client's transport (over next) that records
// each post's deadline by delivery id.
type postDeadlines struct {
	next      *http.Transport
	mu        sync.Mutex
	deadlines map[string]time.Time
}

func (p *postDeadlines) RoundTrip(r *http.Request) (*http.Response, error) {
	dl, _ := r.Context().Deadline()
	p.mu.Lock()
	p.deadlines[r.Header.Get("X-Contractd-Delivery")] = dl
	p.mu.Unlock()
	return p.next.RoundTrip(r)
}

// A receiver that hangs: each post takes the whole post timeout. A batch
// stops being posted once a post could outlast the batch's lease (another
// replica may have claimed the rest by then); the rest stay in the outbox.
// Posts go 8 at a time: with a 300 ms timeout and an 800 ms lease, 8 start
// at once, 8 more when they time out, and the last 4 of the 20 are left.
// (One at a time, 2 of them were posted.) One claimed batch is posted
// (postBatch), each post's deadline read from its request: set from the
// clock reading that let it start, it is within the lease for every post
// but the batch's first, which goes whatever the lease. The test ran
// deliver, which claims again once a batch is done: under load the batch
// outlived its lease and the 4 left were claimed and posted ('20 posts'),
// and it read when a post reached the receiver, later than its deadline's
// start ('posted 137.8ms before its lease ended', at 150 ms and 400 ms).
func TestWebhookBatchStopsAtItsLease(t *testing.T) {
	const items = 20
	rh := newReviewHarness(t)
	rh.q.Webhook = true
	for range items {
		rh.needsReview(classifyReq)
	}
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		io.Copy(io.Discard, r.Body) // read whole, so the client leaving cancels r's context
		select {                    // hangs until the post times out
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer hook.Close()
	const timeout, lease = 300 * time.Millisecond, 800 * time.Millisecond
	pd := &postDeadlines{next: &http.Transport{}, deadlines: map[string]time.Time{}}
	wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Backoff: time.Hour, MaxAge: time.Hour,
		Timeout: timeout, Lease: lease, Client: &http.Client{Transport: pd}}
	claimed := time.Now()
	ds, err := rh.store.ClaimDeliveries(context.Background(), claimed, 32, lease)
	if err != nil || len(ds) != items {
		t.Fatalf("claimed %d deliveries (%v), want %d", len(ds), err, items)
	}
	rh.q.postBatch(context.Background(), rh.store, wh, claimed, ds)
	pd.next.CloseIdleConnections()
	if n := int(posts.Load()); n < webhookParallel || n >= items {
		t.Fatalf("%d posts, want the part of the batch its lease covers, at least the first %d at once", n, webhookParallel)
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	past := 0 // posts whose deadline is past the lease
	for id, dl := range pd.deadlines {
		if end := claimed.Add(lease); dl.After(end) {
			if past++; past > 1 {
				t.Errorf("delivery %s may run %v past its lease: only the batch's first post may", id, dl.Sub(end))
			}
		}
	}
	if ds, _ := rh.store.ClaimDeliveries(context.Background(), time.Now().Add(2*time.Hour), 100, 0); len(ds) != items {
		t.Fatalf("%d deliveries in the outbox, want %d (failed ones retried later, the rest not tried)", len(ds), items)
	}
}

// A delivery already past its age is given up without another post, so an
// outbox grown behind a hung receiver drains without one timeout per row.
func TestWebhookExpiredGivenUpWithoutPost(t *testing.T) {
	rh := newReviewHarness(t)
	rh.q.Webhook = true
	rh.needsReview(classifyReq)
	rh.needsReview(classifyReq)
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(204)
	}))
	defer hook.Close()
	time.Sleep(5 * time.Millisecond)
	wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Backoff: time.Hour, MaxAge: time.Millisecond,
		Timeout: time.Second, Lease: time.Minute, Client: &http.Client{}}
	rh.q.deliver(context.Background(), rh.store, wh)
	wh.Client.CloseIdleConnections()
	if n := posts.Load(); n != 0 {
		t.Errorf("%d posts of deliveries past their age", n)
	}
	if ds, _ := rh.store.ClaimDeliveries(context.Background(), time.Now().Add(2*time.Hour), 10, 0); len(ds) != 0 {
		t.Fatalf("%d deliveries left in the outbox", len(ds))
	}
}

// deliveryOrder records, in the order they happen, the outbox updates
// (store) and the counts (metrics) of a webhook worker.
type deliveryOrder struct {
	nopReviewMetrics
	mu     sync.Mutex
	events []string
}

func (o *deliveryOrder) add(e string) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

func (o *deliveryOrder) Delivery(r DeliveryResult) { o.add(string(r)) }

func (o *deliveryOrder) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

type finishLogged struct {
	review.Store
	o *deliveryOrder
}

func (s finishLogged) FinishDelivery(ctx context.Context, id string, done bool, retryAt time.Time) error {
	err := s.Store.FinishDelivery(ctx, id, done, retryAt)
	s.o.add("finish")
	return err
}

// A delivery is counted once the outbox records its outcome, so whoever
// sees the count (a scrape, or telemetry's TestWebhookDeliveriesCounter,
// which then stops the worker) finds the outbox updated. Counted first,
// that test failed under load: stopping the worker right after the count
// cancelled the update and left the delivery in the outbox. Each outcome:
// failure (the first post), success (the next) and expired (given up).
func TestWebhookCountsDeliveryOnceRecorded(t *testing.T) {
	rh := newReviewHarness(t)
	rh.q.Webhook = true
	o := &deliveryOrder{}
	rh.q.Metrics = o
	st := finishLogged{Store: rh.store, o: o}
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if posts.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Backoff: time.Millisecond, MaxAge: time.Hour,
		Timeout: 10 * time.Second, Lease: time.Minute, Client: &http.Client{}}
	defer wh.Client.CloseIdleConnections()
	rh.needsReview(classifyReq) // its review.created: failed once, then delivered
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(o.seen(), "success") && time.Now().Before(deadline); {
		rh.q.deliver(context.Background(), st, wh)
		time.Sleep(5 * time.Millisecond) // the retry is due 1 ms after the failure
	}
	rh.needsReview(classifyReq)
	wh.MaxAge = time.Nanosecond // past its age at once
	rh.q.deliver(context.Background(), st, wh)

	want := []string{"finish", "failure", "finish", "success", "finish", "expired"}
	if got := o.seen(); !slices.Equal(got, want) {
		t.Errorf("outbox updates and counts %v, want %v (each outcome counted after its update)", got, want)
	}
	if ds, _ := rh.store.ClaimDeliveries(context.Background(), time.Now().Add(2*time.Hour), 10, 0); len(ds) != 0 {
		t.Fatalf("%d deliveries left in the outbox", len(ds))
	}
}

// A receiver that hangs (or fails) is logged, not only counted: the first
// failed post logs 'webhook delivery failed; retried with backoff' with why
// (here: no answer within the post timeout), then at most one line a
// minute; the first post taken again logs how many failed meanwhile. Before,
// nothing was logged until a delivery was given up 24 h later. The URL,
// which may hold a token, is never logged.
func TestWebhookFailureLoggedOnce(t *testing.T) {
	rh := newReviewHarness(t)
	rh.q.Webhook = true
	logs := &testkit.SyncBuffer{}
	rh.q.Log = slog.New(slog.NewJSONHandler(logs, nil))
	for range 3 {
		rh.needsReview(classifyReq)
	}
	var hang atomic.Bool
	hang.Store(true)
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		io.Copy(io.Discard, r.Body)
		if hang.Load() {
			select { // hangs until the post times out
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.WriteHeader(204)
	}))
	defer hook.Close()
	const secretPath = "/hooks/tok-SECRET-123"
	wh := &Webhook{URL: hook.URL + secretPath, Secret: []byte("s"), Backoff: time.Second, MaxAge: time.Hour,
		Timeout: 100 * time.Millisecond, Lease: 10 * time.Second, Client: &http.Client{}}
	defer wh.Client.CloseIdleConnections()
	rh.q.deliver(context.Background(), rh.store, wh)
	if n := posts.Load(); n != 3 {
		t.Fatalf("%d posts to the hung receiver, want 3", n)
	}
	lines := func(msg string) []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
				out = append(out, m)
			}
		}
		return out
	}
	failed := lines("webhook delivery failed; retried with backoff")
	if len(failed) != 1 || failed[0]["error"] != "no answer within 100ms" || failed[0]["level"] != "WARN" {
		t.Fatalf("failure lines: %v\nlog:\n%s", failed, logs)
	}
	// The three posts are in flight together and fail together: the line
	// counts the failures so far, its own and any that came just before.
	if n, _ := failed[0]["failed_posts"].(float64); n < 1 || n > 3 {
		t.Fatalf("failure line: %v", failed[0])
	}
	hang.Store(false)
	time.Sleep(1100 * time.Millisecond) // past the backoff
	rh.q.deliver(context.Background(), rh.store, wh)
	again := lines("webhook receiver took a delivery again")
	if len(again) != 1 || again[0]["failed_posts"] != float64(3) {
		t.Fatalf("recovery lines: %v\nlog:\n%s", again, logs)
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("the webhook URL reached the log:\n%s", logs)
	}
}
