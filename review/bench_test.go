package review_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

// BenchmarkSQLiteCreate is one needs_review item's write, by one writer
// (what an item alone waits for) and by 16 at once (group commit shares
// the WAL commits). See benchCreate for the metrics.
func BenchmarkSQLiteCreate(b *testing.B) {
	benchCreate(b, func(b *testing.B) (review.Store, serverStats) {
		return storetest.OpenSQLite(b, filepath.Join(b.TempDir(), "reviews.db")), serverStats{}
	})
}

// benchCreate writes distinct items with 1 and 16 writers and reports each
// write's p50/p99 (what one needs_review answer waits for its item) and the
// process's CPU per item (user+system; a server's own CPU is not counted),
// which unlike latency hardly moves with the machine's other load; open
// may also give a database server's CPU time and WAL position, reported
// per item too.
func benchCreate(b *testing.B, open func(*testing.B) (review.Store, serverStats)) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, server := open(b)
			serverCPU := server.cpu
			defer s.Close()
			var n atomic.Int64
			now := time.Now()
			var lat testkit.Latencies
			cpu0 := testkit.ProcessCPU()
			var srv0 time.Duration
			if serverCPU != nil {
				srv0 = serverCPU()
			}
			var wal0 int64
			if server.wal != nil {
				wal0 = server.wal()
			}
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			write := func(next func() bool) {
				var mine []time.Duration
				for next() {
					it := storetest.NewItem(fmt.Sprint("r", n.Add(1)), "a", now)
					start := time.Now()
					if _, err := s.Create(context.Background(), it, false); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				lat.Add(mine...)
			}
			if writers == 1 {
				i := 0
				write(func() bool { i++; return i <= b.N })
			} else {
				b.RunParallel(func(pb *testing.PB) { write(pb.Next) })
			}
			b.StopTimer()
			b.ReportMetric(float64((testkit.ProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			if serverCPU != nil {
				b.ReportMetric(float64((serverCPU()-srv0).Microseconds())/float64(b.N), "server-cpu-µs/op")
			}
			if server.wal != nil {
				b.ReportMetric(float64(server.wal()-wal0)/float64(b.N), "wal-B/op")
			}
			lat.Report(b)
		})
	}
}

// BenchmarkSQLiteRecentDedupe is one poll of the dedupe sync (every
// process sharing the store runs one every half second) against 10000
// items with a key: the last half second's 100 items, and an idle poll.
func BenchmarkSQLiteRecentDedupe(b *testing.B) {
	s := storetest.OpenSQLite(b, filepath.Join(b.TempDir(), "reviews.db"))
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

// serverStats reads a database server's counters, when there is a server.
type serverStats struct {
	cpu func() time.Duration // the server's processes' CPU time
	wal func() int64         // the server's WAL insert position, in bytes
}
