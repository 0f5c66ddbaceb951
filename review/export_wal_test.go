package review

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// An export read slowly (a client on a slow link, a million items) holds
// no read transaction between pages: while it runs the checkpointer can
// copy everything written since it began, and the WAL can start over.
// One query over the whole export held its snapshot to the end, and every
// frame committed meanwhile stayed in the WAL (24 MB/s at 400 items/s).
func TestSQLiteExportHoldsNoSnapshot(t *testing.T) {
	s := freshSQLite(t)
	const n = 3000
	populate(t, s, n, time.Now().Add(-24*time.Hour))
	ctx := context.Background()
	var got []string
	blocked := 0
	err := s.Export(ctx, ExportFilter{Status: StatusApproved}, func(it *Item) error {
		got = append(got, it.ID)
		if len(got)%500 != 1 {
			return nil
		}
		// The client is slow: items keep arriving meanwhile.
		for i := range 3 {
			id := fmt.Sprintf("during%06d-%d", len(got), i)
			if _, err := s.Create(ctx, &Item{ID: id, Status: StatusPending, CreatedAt: time.Now(), Route: "route-1"}, false); err != nil {
				return err
			}
		}
		// The store's own checkpointer may be copying at this moment (a
		// PASSIVE checkpoint beside it stops short): only a checkpoint
		// that stays short while the export waits here is the export's.
		var busy, log, done int
		for try := 0; try < 50; try++ {
			if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil {
				return err
			}
			if done >= log {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		blocked++
		t.Logf("after %d items: the checkpoint copied %d of the WAL's %d frames (busy %d)", len(got), done, log, busy)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if blocked > 0 {
		t.Errorf("the export's read transaction kept the checkpoint from copying the WAL %d times", blocked)
	}
	// Every approved item, once, newest resolution first.
	want := testkit.QueryColumn[string](t, s.db, `SELECT id FROM reviews WHERE status = 'approved' ORDER BY COALESCE(resolved_ns, created_ns) DESC, id DESC`)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exported %d items, want the %d approved in order", len(got), len(want))
	}
}
