package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// trimFree is how much resident heap makes trimMemory give memory back to
// the OS after a burst, and trimEvery how often it looks.
const (
	trimFree  = 32 << 20
	trimEvery = 5 * time.Second
)

// trimMemory returns memory to the OS once a burst is over. After load
// stops an idle process allocates nothing, so no collection runs: the
// heap the burst grew stays resident for minutes, with its garbage, its
// free pages and the pooled body and reply buffers (kept until two
// collections pass). Every trimEvery it looks: when there was traffic
// since the last trim but none since the last look (activity counts the
// bodies and replies held so far), and more than trimFree of heap is
// resident, it collects twice and releases what is free
// (debug.FreeOSMemory), so RSS falls back within seconds (make soak).
// Under load, or idle after a trim, it does nothing.
func trimMemory(ctx context.Context, activity func() int64) {
	sample := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	last, trimmed := activity(), activity()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := activity()
		quiet := now == last
		last = now
		if !quiet || now == trimmed {
			continue
		}
		metrics.Read(sample)
		var resident uint64
		for _, s := range sample {
			if s.Value.Kind() == metrics.KindUint64 {
				resident += s.Value.Uint64()
			}
		}
		if resident > trimFree {
			// Twice: sync.Pool keeps what the first collection finds
			// pooled until the second.
			debug.FreeOSMemory()
			debug.FreeOSMemory()
		}
		trimmed = now
	}
}
