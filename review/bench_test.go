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

// BenchmarkSQLiteRecentDedupe is one poll of the dedupe sync (every
// process sharing the store runs one every half second) against 10000
// items with a key: the last half second's 100 items, and an idle poll.
func BenchmarkSQLiteRecentDedupe(b *testing.B) {
	s, err := review.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "reviews.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now().Add(-time.Hour)
	for i := 0; i < 10000; i++ {
		it := storetest.NewItem(fmt.Sprint("r", i), "a", start.Add(time.Duration(i)*5*time.Millisecond))
		it.Dedupe = &review.Dedupe{Key: fmt.Sprintf("%064x", i), Until: start.Add(2 * time.Hour), Answer: []byte(`{"error":{}}`)}
		if _, err := s.Create(context.Background(), it, false); err != nil {
			b.Fatal(err)
		}
	}
	end := start.Add(10000 * 5 * time.Millisecond)
	for _, c := range []struct {
		name  string
		since time.Time
		want  int
	}{{"100 new", end.Add(-500 * time.Millisecond), 100}, {"idle", end, 0}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				recs, err := s.RecentDedupe(context.Background(), c.since, start, 1000)
				if err != nil || len(recs) != c.want {
					b.Fatalf("%d records, %v", len(recs), err)
				}
			}
		})
	}
}
