package testkit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Latencies gathers what concurrent benchmark workers measured and
// reports it as p50-ms and p99-ms (nearest rank), so every latency
// benchmark reads its percentiles the same way.
type Latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

// Add appends one worker's latencies; safe for concurrent use.
func (l *Latencies) Add(ds ...time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, ds...)
	l.mu.Unlock()
}

// Report sorts what was gathered and reports its p50 and p99 on b.
func (l *Latencies) Report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.all)
	if n := len(l.all); n > 0 {
		b.ReportMetric(float64(l.all[n/2].Nanoseconds())/1e6, "p50-ms")
		b.ReportMetric(float64(l.all[n*99/100].Nanoseconds())/1e6, "p99-ms")
	}
}
