package proxy

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// damagedRetentionStore's retention reports an item deleted though its
// attempts did not decode, as the SQLite store does, and counts its passes.
type damagedRetentionStore struct {
	review.Store
	passes atomic.Int64
}

func (d *damagedRetentionStore) DeleteResolvedBefore(context.Context, time.Time) (int, error) {
	d.passes.Add(1)
	return 3, &review.DamagedItemsError{IDs: []string{"req_damaged"}}
}

// Run's retention pass that deleted a damaged item (its attempts
// unreadable) is a pass done, logged as a warning naming the item: not
// "review retention cleanup failed" and tried again at every tick.
func TestRetentionReportsDamagedItems(t *testing.T) {
	rh := newReviewHarness(t)
	logs := &testkit.SyncBuffer{}
	rh.q.Log = slog.New(slog.NewJSONHandler(logs, nil))
	ds := &damagedRetentionStore{Store: rh.store}
	rh.q.store.Store(ptrTo[review.Store](ds))
	rh.q.Retention = 24 * time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rh.q.Run(ctx); close(done) }()
	time.Sleep(10 * rh.q.Retry) // ten ticks
	cancel()
	<-done
	if n := ds.passes.Load(); n != 1 {
		t.Errorf("%d retention passes in ten ticks, want 1 (the next an hour later)", n)
	}
	var warned int
	for _, m := range logLines(t, logs) {
		switch m["msg"] {
		case "review retention cleanup failed":
			t.Errorf("logged as a failure: %v", m)
		case "review retention deleted damaged items (attempts unreadable)":
			warned++
			if ids, _ := m["review_ids"].([]any); m["items"] != 1.0 || len(ids) != 1 || ids[0] != "req_damaged" {
				t.Errorf("warning %v", m)
			}
		}
	}
	if warned != 1 {
		t.Errorf("%d warnings, want 1:\n%s", warned, logs)
	}
}
