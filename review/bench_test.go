package review_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

// BenchmarkSQLiteCreate is one needs_review item's write, 16 writers at
// once (group commit shares the WAL commits).
func BenchmarkSQLiteCreate(b *testing.B) {
	s, err := review.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "reviews.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int64
	now := time.Now()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			it := storetest.NewItem(fmt.Sprint("r", n.Add(1)), "a", now)
			if _, err := s.Create(context.Background(), it, false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
