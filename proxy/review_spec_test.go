package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

// resolvedLines are the review_resolved audit lines written so far, by
// review id.
func resolvedLines(t *testing.T, raw string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if m["event"] == string(audit.EventReviewResolved) {
			out[m["review_id"].(string)] = m
		}
	}
	return out
}

// Each resolution writes one audit line {"event":
// "review_resolved", time, review_id, route, status, by, reviewer,
// output_sha256}, whoever resolved it; request lines carry "event":
// "request".
func TestReviewResolvedAuditLines(t *testing.T) {
	rh := newReviewHarness(t)
	approved, rejected, rerun := rh.needsReview(classifyReq), rh.needsReview(classifyReq), rh.needsReview(classifyReq)
	if r := rh.call("POST", "/admin/reviews/"+approved+"/approve", `{"output":`+validClassify+`,"reviewer":"ann","note":"fixed"}`, adminKey); r.Status != 200 {
		t.Fatalf("approve %d %s", r.Status, r.Body)
	}
	if r := rh.call("POST", "/admin/reviews/"+rejected+"/reject", `{"reviewer":"bob"}`, adminKey); r.Status != 200 {
		t.Fatalf("reject %d %s", r.Status, r.Body)
	}
	rh.valid.Store(true)
	if r := rh.call("POST", "/admin/reviews/"+rerun+"/rerun", ``, adminKey); r.Status != 200 || r.JSON["status"] != "approved" {
		t.Fatalf("rerun %d %s", r.Status, r.Body)
	}
	lines := resolvedLines(t, rh.sink.Raw())
	if len(lines) != 3 {
		t.Fatalf("%d review_resolved lines, want 3:\n%s", len(lines), rh.sink.Raw())
	}
	for _, tc := range []struct {
		id, status, by, reviewer string
		output                   bool
	}{
		{approved, "approved", "reviewer", "ann", true},
		{rejected, "rejected", "reviewer", "bob", false},
		{rerun, "approved", "rerun", "", true},
	} {
		it, err := rh.store.Get(context.Background(), tc.id)
		if err != nil {
			t.Fatal(err)
		}
		l := lines[tc.id]
		keys := make([]string, 0, len(l))
		for k := range l {
			keys = append(keys, k)
		}
		if len(l) != 8 {
			t.Errorf("%s: keys %v, want event time review_id route status by reviewer output_sha256", tc.id, keys)
		}
		wantSum := ""
		if tc.output {
			s := sha256.Sum256(it.Resolution.Output)
			wantSum = hex.EncodeToString(s[:])
		}
		at, err := time.Parse(time.RFC3339Nano, l["time"].(string))
		if err != nil || !at.Equal(*it.ResolvedAt) {
			t.Errorf("%s: time %v, item resolved_at %v", tc.id, l["time"], it.ResolvedAt)
		}
		if l["route"] != "classify" || l["status"] != tc.status || l["by"] != tc.by || l["reviewer"] != tc.reviewer ||
			l["output_sha256"] != wantSum {
			t.Errorf("%s: line %v, want status %s by %s reviewer %q output_sha256 %q", tc.id, l, tc.status, tc.by, tc.reviewer, wantSum)
		}
	}
	for _, ev := range rh.sink.Events() {
		if ev.Event != audit.EventRequest {
			t.Errorf("request line with event %q", ev.Event)
		}
	}
}

// Webhook deliveries past OutboxPurgeAfter are deleted by Run with no
// webhook configured (no RunWebhook): the deliveries of a webhook removed
// from the config stayed in the outbox for ever. Newer ones stay.
func TestRunPurgesOldDeliveries(t *testing.T) {
	rh := newReviewHarness(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := rh.store.Create(ctx, storetest.NewItem(id, "classify", time.Now()), true); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := rh.store.Create(ctx, storetest.NewItem("fresh", "classify", time.Now()), true); err != nil {
		t.Fatal(err)
	}
	rh.q.OutboxPurgeAfter = 200 * time.Millisecond
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rh.q.Run(rctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	var left []review.Delivery
	for {
		var err error
		// Claimed an hour ahead so nothing is hidden by a lease; not
		// finished, so the purge's work is what is seen.
		left, err = rh.store.ClaimDeliveries(ctx, time.Now().Add(time.Hour), 100, time.Nanosecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) < 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if len(left) != 1 || left[0].ReviewID != "fresh" {
		t.Fatalf("outbox holds %+v, want the fresh item's delivery alone", left)
	}
}

// Resolved items older than review.retention are deleted;
// pending items never are. The store's DeleteResolvedBefore is proven in
// review/storetest; this proves the queue's Run applies it.
func TestRunAppliesRetention(t *testing.T) {
	rh := newReviewHarness(t)
	ctx := context.Background()
	now := time.Now()
	old, fresh, pending := storetest.NewItem("old", "classify", now.Add(-100*time.Hour)),
		storetest.NewItem("fresh", "classify", now.Add(-100*time.Hour)),
		storetest.NewItem("pending", "classify", now.Add(-1000*time.Hour))
	for _, it := range []*review.Item{old, fresh, pending} {
		if _, err := rh.store.Create(ctx, it, false); err != nil {
			t.Fatal(err)
		}
	}
	resolve := func(id string, at time.Time) {
		t.Helper()
		res := review.Resolve{Status: review.StatusRejected, At: at, Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "ann"}}
		if _, err := rh.store.Resolve(ctx, id, res); err != nil {
			t.Fatal(err)
		}
	}
	resolve("old", now.Add(-50*time.Hour))
	resolve("fresh", now.Add(-time.Hour))
	rh.q.Retention = 24 * time.Hour
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { rh.q.Run(rctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := rh.store.Get(ctx, "old"); errors.Is(err, review.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a rejected item resolved 50h ago survived retention 24h")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	for _, id := range []string{"fresh", "pending"} {
		if _, err := rh.store.Get(ctx, id); err != nil {
			t.Errorf("%s deleted by retention: %v", id, err)
		}
	}
}

// key_id is "" without auth, and the client endpoint then serves
// the item to any caller (there is no key to tell clients apart).
func TestReviewKeyIDWithoutAuth(t *testing.T) {
	rh := newReviewHarness(t)
	setEnv(rh.srv, "CONTRACTD_TEST_CLIENT_KEYS", "")
	rh.srv.Swap(rh.srv.Runtime())
	r := rh.call("POST", "/v1/chat/completions", classifyReq, "")
	if r.Status != 422 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	id := r.errorObj()["review"].(map[string]any)["id"].(string)
	it, err := rh.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if it.KeyID != "" {
		t.Errorf("key_id %q without auth, want \"\"", it.KeyID)
	}
	if r := rh.call("GET", "/v1/reviews/"+id, "", ""); r.Status != 200 || r.JSON["status"] != "pending" ||
		r.JSON["resolved_at"] != nil || r.JSON["resolution"] != nil {
		t.Fatalf("GET without auth: %d %s", r.Status, r.Body)
	}
}

// A budget_exhausted 422 is a needs_review like a contract_violation: its
// item is stored before the answer, with the attempts made (none here,
// the budget ran out before the first), and the client can poll it.
func TestBudgetExhaustedIsStored(t *testing.T) {
	rh := newReviewHarness(t)
	body := `{"model":"broke","messages":[` + userHi + `]}`
	r := rh.call("POST", "/v1/chat/completions", body, clientKey)
	wantError(t, r, 422, "needs_review", CodeBudgetExhausted, nil)
	rv := r.errorObj()["review"].(map[string]any)
	id := rv["id"].(string)
	if rv["stored"] != true || rv["url"] != "/v1/reviews/"+id {
		t.Fatalf("review object %v", rv)
	}
	it, err := rh.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("not in the store when the 422 arrived: %v", err)
	}
	if it.Status != review.StatusPending || it.Route != "broke" || len(it.Attempts) != 0 || string(it.Request) != body || string(it.Input) != `"hi"` {
		t.Errorf("item %+v", it)
	}
	if g := rh.call("GET", "/v1/reviews/"+id, "", clientKey); g.Status != 200 || g.JSON["status"] != "pending" {
		t.Errorf("client poll %d %s", g.Status, g.Body)
	}
	if h := rh.up.Hits(); h != 0 {
		t.Errorf("upstream called %d times", h)
	}
}

// A stored item's hashes (prompt, contract, each attempt's output) are
// those of its request's audit event, so either can find the other.
func TestReviewHashesMatchAudit(t *testing.T) {
	rh := newReviewHarness(t)
	id := rh.needsReview(classifyReq)
	it, err := rh.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ev := rh.sink.waitEvent(t, id)
	if ev.Prompt == nil || ev.Contract == nil || it.Prompt != *ev.Prompt || it.Contract != *ev.Contract || it.Prompt.SHA256 == "" || it.Contract.SHA256 == "" {
		t.Fatalf("item prompt %+v contract %+v, audit prompt %+v contract %+v", it.Prompt, it.Contract, ev.Prompt, ev.Contract)
	}
	if len(it.Attempts) != len(ev.Attempts) || len(it.Attempts) != 2 {
		t.Fatalf("item %d attempts, audit %d", len(it.Attempts), len(ev.Attempts))
	}
	for i, a := range it.Attempts {
		sum := sha256.Sum256([]byte(a.Output))
		if a.OutputSHA256 != ev.Attempts[i].OutputSHA256 || a.OutputSHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("attempt %d: item output_sha256 %s, audit %s, sha256(output) %x", a.Attempt, a.OutputSHA256, ev.Attempts[i].OutputSHA256, sum)
		}
	}
}

// Reruns of one item at once that all fail again append every attempt,
// numbered on without a repeat (the store numbers them in its
// transaction; TestSQLiteStore proves the interleaving deterministically).
func TestConcurrentRerunsNumberOn(t *testing.T) {
	rh := newReviewHarness(t)
	id := rh.needsReview(classifyReq)
	const n = 4
	done := make(chan int, n)
	for range n {
		go func() { done <- rh.call("POST", "/admin/reviews/"+id+"/rerun", ``, adminKey).Status }()
	}
	for range n {
		if st := <-done; st != 200 {
			t.Fatalf("rerun status %d", st)
		}
	}
	it, err := rh.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(it.Attempts) != 2+2*n {
		t.Fatalf("%d attempts, want %d", len(it.Attempts), 2+2*n)
	}
	for i, a := range it.Attempts {
		if a.Attempt != i+1 {
			t.Fatalf("attempt %d numbered %d", i+1, a.Attempt)
		}
	}
}

// The webhook never delays a client: with the receiver hanging on every
// delivery, requests that end in needs_review (each enqueuing one) are
// answered as fast as without a webhook.
func TestWebhookNeverDelaysClient(t *testing.T) {
	rh := newReviewHarness(t)
	rh.q.Webhook = true
	release := make(chan struct{})
	var hits atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(204)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	wh := &Webhook{URL: hook.URL, Secret: []byte("s"), Backoff: time.Millisecond, Client: &http.Client{}}
	go func() { rh.q.RunWebhook(ctx, wh); close(done) }()
	stop := func() {
		cancel()
		<-done
		close(release)
		wh.Client.CloseIdleConnections()
		hook.Close()
		rh.shutdown()
	}
	rh.needsReview(classifyReq)
	deadline := time.Now().Add(5 * time.Second)
	for hits.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if hits.Load() == 0 {
		stop()
		t.Fatal("the webhook was never called")
	}
	// The receiver now holds a delivery open; more 422s go out meanwhile.
	for range 5 {
		start := time.Now()
		rh.needsReview(classifyReq)
		if el := time.Since(start); el > time.Second {
			t.Errorf("a needs_review answer took %v with the webhook receiver hanging", el)
		}
	}
	stop()
}

// GET /admin/reviews without limit answers 50 items and a cursor to the
// rest; limit=500, the most, answers them all.
func TestListDefaultLimit(t *testing.T) {
	rh := newReviewHarness(t)
	base := time.Now().Add(-time.Hour)
	for i := range 51 {
		it := storetest.NewItem(fmt.Sprintf("item-%02d", i), "classify", base.Add(time.Duration(i)*time.Second))
		if _, err := rh.store.Create(context.Background(), it, false); err != nil {
			t.Fatal(err)
		}
	}
	r := rh.call("GET", "/admin/reviews", "", adminKey)
	items, _ := r.JSON["items"].([]any)
	if r.Status != 200 || len(items) != 50 || r.JSON["next_cursor"] == nil || items[0].(map[string]any)["id"] != "item-50" {
		t.Fatalf("default page: %d, %d items, next_cursor %v", r.Status, len(items), r.JSON["next_cursor"])
	}
	r = rh.call("GET", "/admin/reviews?cursor="+r.JSON["next_cursor"].(string), "", adminKey)
	if items, _ := r.JSON["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != "item-00" || r.JSON["next_cursor"] != nil {
		t.Fatalf("second page: %s", r.Body)
	}
	r = rh.call("GET", "/admin/reviews?limit=500", "", adminKey)
	if items, _ := r.JSON["items"].([]any); len(items) != 51 || r.JSON["next_cursor"] != nil {
		t.Fatalf("limit=500: %d items, next_cursor %v", len(items), r.JSON["next_cursor"])
	}
}

// A wait longer than the 60 s cap is taken (cut to the cap), not refused:
// the poll holds and returns as soon as the item is resolved.
func TestReviewWaitOverCapIsCut(t *testing.T) {
	rh := newReviewHarness(t)
	id := rh.needsReview(classifyReq)
	done := make(chan *result)
	go func() { done <- rh.call("GET", "/v1/reviews/"+id+"?wait=24h", "", clientKey) }()
	for rh.q.Notifier.(*review.Hub).Waiting() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if r := rh.call("POST", "/admin/reviews/"+id+"/reject", `{"reviewer":"ann"}`, adminKey); r.Status != 200 {
		t.Fatalf("reject %d %s", r.Status, r.Body)
	}
	select {
	case r := <-done:
		if r.Status != 200 || r.JSON["status"] != "rejected" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end on the resolution")
	}
	if MaxReviewWait != 60*time.Second {
		t.Errorf("MaxReviewWait %v, want the 60 s the API promises", MaxReviewWait)
	}
}

// Named admin keys fail closed: when the variable holds no key (only
// commas and spaces; config refuses it, this is the server's own guard)
// the admin endpoints let nobody in, on the admin listener and on listen.
func TestAdminKeysNamedButEmptyFailClosed(t *testing.T) {
	rh := newReviewHarness(t)
	setEnv(rh.srv, "CONTRACTD_TEST_ADMIN_KEYS", " , ")
	rh.srv.Swap(rh.srv.Runtime())
	adminOnly := httptest.NewServer(rh.srv.AdminGate(&Admin{Reviews: rh.srv.ReviewAdmin()}, false))
	defer adminOnly.Close()
	for _, base := range []string{adminOnly.URL, rh.front.URL} {
		for _, key := range []string{"", adminKey, clientKey, " "} {
			r := send(t, rh.client, "GET", base+"/admin/reviews", "", key)
			if r.Status != 401 {
				t.Errorf("%s with key %q: %d, want 401", base, key, r.Status)
			}
		}
	}
	rh.client.CloseIdleConnections()
}

// ?wait= holds the poll for as long as asked (up to the cap) whatever
// request_timeout is: the poll's write deadline follows the wait, so a
// wait longer than request_timeout plus the write grace still answers.
func TestReviewWaitOutlivesRequestTimeout(t *testing.T) {
	rh := newReviewHarness(t)
	rt := *rh.srv.Runtime()
	rt.Server.RequestTimeout = 300 * time.Millisecond
	rh.srv.Swap(&rt)
	rh.srv.WriteGrace = 100 * time.Millisecond
	id := rh.needsReview(classifyReq)
	start := time.Now()
	// send fails the test when the connection breaks before an answer.
	r := rh.call("GET", "/v1/reviews/"+id+"?wait=1500ms", "", clientKey)
	if r.Status != 200 || r.JSON["status"] != "pending" {
		t.Fatalf("after %v: status %d body %s", time.Since(start), r.Status, r.Body)
	}
	if el := time.Since(start); el < 1400*time.Millisecond {
		t.Errorf("answered after %v, before the wait ended", el)
	}
}

// slowExport is a store whose export takes its time per item, as a large
// store's does.
type slowExport struct {
	review.Store
	per time.Duration
}

func (s *slowExport) Export(ctx context.Context, f review.ExportFilter, fn func(*review.Item) error) error {
	return s.Store.Export(ctx, f, func(it *review.Item) error {
		time.Sleep(s.per)
		return fn(it)
	})
}

// The export streams for as long as it has items: an export that takes
// longer than request_timeout plus the write grace is not cut off, as long
// as it keeps writing.
func TestExportOutlivesRequestTimeout(t *testing.T) {
	rh := newReviewHarness(t)
	const n = 150
	addApproved(t, rh, "exp", n)
	rh.store.Store = &slowExport{Store: rh.store.Store, per: 5 * time.Millisecond} // 750 ms in all
	rt := *rh.srv.Runtime()
	rt.Server.RequestTimeout = 100 * time.Millisecond
	rh.srv.Swap(&rt)
	rh.srv.WriteGrace = 200 * time.Millisecond
	r := rh.call("GET", "/admin/reviews/export?status=approved", "", adminKey)
	lines := strings.Split(strings.TrimSpace(string(r.Body)), "\n")
	if r.Status != 200 || len(lines) != n {
		t.Fatalf("status %d, %d lines of %d", r.Status, len(lines), n)
	}
	rh.store.Store = rh.store.Store.(*slowExport).Store
}

// failingExport passes the first `after` items of the export on, then
// fails as a store that went away (or hung past its deadline) does.
type failingExport struct {
	review.Store
	after int
}

var errExportInjected = errors.New("connection lost (injected)")

func (s *failingExport) Export(ctx context.Context, f review.ExportFilter, fn func(*review.Item) error) error {
	n := 0
	err := s.Store.Export(ctx, f, func(it *review.Item) error {
		if n == s.after {
			return errExportInjected
		}
		n++
		return fn(it)
	})
	if err == nil && n <= s.after {
		return errExportInjected
	}
	return err
}

// An export the store fails is never answered as a whole one. Failed
// before anything reached the client (nothing read yet, or fewer lines than
// one flush): 503 review_store_unavailable, as the list answers. It was a
// 200 with what the buffer held (with PostgreSQL hung: a 200 with an empty
// body after 5 s, "no approved items"). Failed after lines went out: the
// response is cut without the chunked stream's end, so the client's read
// fails instead of ending cleanly on a partial file.
func TestExportStoreFailureIsNotACompleteExport(t *testing.T) {
	rh := newReviewHarness(t)
	addApproved(t, rh, "exf", 150)
	orig := rh.store.Store
	defer func() { rh.store.Store = orig }()
	for _, after := range []int{0, 3} {
		rh.store.Store = &failingExport{Store: orig, after: after}
		wantError(t, rh.call("GET", "/admin/reviews/export?status=approved", "", adminKey), 503, "server_error", "review_store_unavailable", nil)
	}
	rh.store.Store = &failingExport{Store: orig, after: 100}
	req, _ := http.NewRequest("GET", rh.front.URL+"/admin/reviews/export?status=approved", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err == nil {
		t.Fatalf("export failed after 100 lines: status %d, read error %v, %d bytes: want the transfer cut", resp.StatusCode, err, len(body))
	}
	if lines := strings.Split(strings.TrimSpace(string(body)), "\n"); len(lines) < 64 || len(lines) > 100 {
		t.Fatalf("%d lines before the cut, want the whole lines read (64..100)", len(lines))
	}
	// Every line that arrived is whole.
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if !json.Valid([]byte(l)) {
			t.Fatalf("a torn line: %q", l)
		}
	}
	rh.store.Store = orig
	if r := rh.call("GET", "/admin/reviews/export?status=approved", "", adminKey); r.Status != 200 || len(strings.Split(strings.TrimSpace(string(r.Body)), "\n")) != 150 {
		t.Fatalf("the whole export afterwards: %d", r.Status)
	}
}

// addApproved stores n items approved an hour ago, a millisecond apart,
// with ids prefix-000, prefix-001, …: enough for an export of several
// flushes.
func addApproved(t *testing.T, rh *reviewHarness, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	for i := range n {
		it := storetest.NewItem(fmt.Sprintf("%s-%03d", prefix, i), "classify", base)
		if _, err := rh.store.Create(ctx, it, false); err != nil {
			t.Fatal(err)
		}
		res := review.Resolve{Status: review.StatusApproved, At: base.Add(time.Duration(i) * time.Millisecond),
			Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "ann", Output: json.RawMessage(`{"ok":true}`)}}
		if _, err := rh.store.Resolve(ctx, it.ID, res); err != nil {
			t.Fatal(err)
		}
	}
}
