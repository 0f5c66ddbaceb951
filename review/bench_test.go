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

// BenchmarkSQLiteFindDedupe is the dedupe lookup every contract request
// makes when the proxy's memory misses, against 10000 items with a key:
// a miss (the common case: the request is not a repeat) and a hit.
func BenchmarkSQLiteFindDedupe(b *testing.B) {
	s, err := review.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "reviews.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for i := 0; i < 10000; i++ {
		it := storetest.NewItem(fmt.Sprint("r", i), "a", now)
		it.Dedupe = &review.Dedupe{Key: fmt.Sprintf("%064x", i), Until: now.Add(time.Hour), Answer: []byte(`{"error":{}}`)}
		if _, err := s.Create(context.Background(), it, false); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct{ name, key string }{{"miss", "nope"}, {"hit", fmt.Sprintf("%064x", 5000)}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, _, err := s.FindDedupe(context.Background(), c.key, now)
				if (err == nil) != (c.name == "hit") {
					b.Fatal(err)
				}
			}
		})
	}
}
