package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// hungStore's Create waits for its deadline while hung is set, as a
// PostgreSQL stopped with SIGSTOP does, and counts the calls; so does Get
// while hangReads is set.
type hungStore struct {
	*faultStore
	hung      atomic.Bool
	hangReads atomic.Bool
	creates   atomic.Int64
}

func (h *hungStore) Get(ctx context.Context, id string) (*review.Item, error) {
	if h.hangReads.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.faultStore.Get(ctx, id)
}

func (h *hungStore) Create(ctx context.Context, it *review.Item, hook bool) (bool, error) {
	h.creates.Add(1)
	if h.hung.Load() {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return h.faultStore.Create(ctx, it, hook)
}

// spooledIDs are the ids in the spool's file, in its order.
func spooledIDs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var it struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	return ids
}

// TestStoreBreakerSpoolsWithoutWaiting: while the store hangs, each 422
// waited the store's write deadline (5 s in serve) before it was spooled,
// for as long as the hang lasted. After storeBreakAfter writes in a row
// failed, the next items go to the spool at once, without asking the
// store (still stored: true, fsynced, counted as store errors, in order);
// the breaker's opening is logged once. Run's drain is the one probe: once
// the store answers it moves the spool in, the breaker closes (logged),
// and the next item is stored directly. Every id is in the store.
func TestStoreBreakerSpoolsWithoutWaiting(t *testing.T) {
	rh := newReviewHarness(t)
	logs := &testkit.SyncBuffer{}
	rh.q.Log = slog.New(slog.NewJSONHandler(logs, nil))
	counts := &reviewCounts{}
	rh.q.Metrics = counts
	hs := &hungStore{faultStore: rh.store}
	rh.q.store.Store(ptrTo[review.Store](hs))
	const deadline = 300 * time.Millisecond
	rh.q.writeTimeout = deadline
	hs.hung.Store(true)

	var ids []string
	for i := range storeBreakAfter {
		start := time.Now()
		ids = append(ids, rh.needsReview(classifyReq))
		if el := time.Since(start); el < deadline {
			t.Fatalf("422 %d with the store hung answered after %v, before the write's deadline: the store was not asked", i+1, el)
		}
	}
	const more = 5
	for i := range more {
		start := time.Now()
		ids = append(ids, rh.needsReview(classifyReq))
		if el := time.Since(start); el >= deadline {
			t.Errorf("422 %d with the breaker open answered after %v: it waited for the hung store", storeBreakAfter+i+1, el)
		}
	}
	if n := hs.creates.Load(); n != storeBreakAfter {
		t.Errorf("the store was asked %d times, want %d (then not while the breaker is open)", n, storeBreakAfter)
	}
	if got := spooledIDs(t, rh.q.Spool.Path); len(got) != len(ids) || got[0] != ids[0] || got[len(got)-1] != ids[len(ids)-1] {
		t.Errorf("spool holds %v, want %v in order", got, ids)
	} else {
		for i := range ids {
			if got[i] != ids[i] {
				t.Errorf("spool holds %v, want %v in order", got, ids)
				break
			}
		}
	}
	if n := counts.storeErrs.Load(); n != int64(len(ids)) {
		t.Errorf("contractd_review_store_errors_total counted %d, want %d", n, len(ids))
	}
	countMsg := func(msg string) (n int, last map[string]any) {
		for _, m := range logLines(t, logs) {
			if m["msg"] == msg {
				n, last = n+1, m
			}
		}
		return n, last
	}
	const opened = "review store failing; needs_review items are spooled without waiting for it until the spool moves in"
	if n, m := countMsg(opened); n != 1 || m["failed_writes"] != float64(storeBreakAfter) {
		t.Errorf("%d breaker lines (last %v), want one with failed_writes %d:\n%s", n, m, storeBreakAfter, logs)
	}
	if n, _ := countMsg("review store write failed; spooling"); n != 1 {
		t.Errorf("%d write failure lines, want 1", n)
	}

	// The store answers again: Run's drain moves the spool in and closes
	// the breaker; the next item is stored, not spooled.
	hs.hung.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rh.q.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	const closed = "review store takes items again; needs_review items are stored, not spooled"
	if !testkit.WaitFor(5*time.Second, 5*time.Millisecond, func() bool { n, _ := countMsg(closed); return n == 1 }) {
		t.Fatalf("the breaker did not close after the store came back:\n%s", logs)
	}
	if rh.q.Spool.Pending() {
		t.Fatal("the breaker closed before the spool moved in")
	}
	before := hs.creates.Load()
	ids = append(ids, rh.needsReview(classifyReq))
	if hs.creates.Load() == before || rh.q.Spool.Pending() {
		t.Error("the item after the breaker closed was not stored directly")
	}
	for _, id := range ids {
		if _, err := rh.store.Get(context.Background(), id); err != nil {
			t.Errorf("%s not in the store: %v", id, err)
		}
	}
	if n, m := countMsg(closed); n != 1 || m["by"] != "drain" {
		t.Errorf("%d breaker closing lines (last %v), want one by drain", n, m)
	}
}

// With the breaker open, an item the spool cannot take (a full disk, a
// spool that cannot be written) is given to the store after all, as before
// the breaker: stored there if it answers, not lost for want of asking.
func TestStoreBreakerSpoolFailsAsksTheStore(t *testing.T) {
	rh := newReviewHarness(t)
	counts := &reviewCounts{}
	rh.q.Metrics = counts
	rh.store.fail.Store(true)
	for range storeBreakAfter {
		rh.needsReview(classifyReq)
	}
	if !rh.q.bypass.Load() {
		t.Fatalf("breaker not open after %d failed writes", storeBreakAfter)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rh.q.Spool.Path = filepath.Join(notDir, "review-spool.jsonl") // not writable, whoever runs the test
	rh.store.fail.Store(false)
	id := rh.needsReview(classifyReq) // stored: true
	if _, err := rh.store.Get(context.Background(), id); err != nil {
		t.Fatalf("the spool failed and the store was not asked: %v", err)
	}
	if counts.lost.Load() != 0 {
		t.Error("an item counted lost though the store took it")
	}
	if rh.q.bypass.Load() {
		t.Error("the breaker stayed open after the store took an item")
	}
}

// TestPollWhileBreakerOpenReadsTheSpool: with the store hung, reads as
// well as writes, a client's poll of an item spooled meanwhile is answered
// from the spool at once once the breaker is open. It waited for the store
// read's deadline first (every poll of the hang, up to three reads each).
func TestPollWhileBreakerOpenReadsTheSpool(t *testing.T) {
	rh := newReviewHarness(t)
	hs := &hungStore{faultStore: rh.store}
	rh.q.store.Store(ptrTo[review.Store](hs))
	rh.q.writeTimeout = 100 * time.Millisecond
	hs.hung.Store(true)
	hs.hangReads.Store(true)
	defer hs.hangReads.Store(false)
	var ids []string
	for range storeBreakAfter + 1 {
		ids = append(ids, rh.needsReview(classifyReq))
	}
	if !rh.q.bypass.Load() {
		t.Fatal("the breaker did not open")
	}
	for _, id := range []string{ids[0], ids[len(ids)-1]} { // spooled after a failed write, and at once
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rh.front.URL+"/v1/reviews/"+id, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+clientKey)
		start := time.Now()
		resp, err := rh.client.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("poll of spooled %s with the store hung: %v after %v", id, err, time.Since(start).Round(time.Millisecond))
		}
		var got struct{ ID, Status string }
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		cancel()
		if el := time.Since(start); resp.StatusCode != 200 || err != nil || got.ID != id || got.Status != "pending" || el > time.Second {
			t.Errorf("poll of spooled %s: %d %+v %v after %v, want 200 pending at once", id, resp.StatusCode, got, err, el)
		}
	}
}
