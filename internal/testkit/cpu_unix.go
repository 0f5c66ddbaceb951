//go:build unix

package testkit

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the CPU time (user and system) this process has used so
// far: benchmarks report it per operation beside wall time.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUPerOp reports the process's CPU time (user and system, every thread:
// handler, fake upstream, client, GC) per operation as cpu-ns/op, which a
// loaded machine disturbs far less than wall time: call it at the start
// of a benchmark, and the function it returns at the end.
func CPUPerOp(b *testing.B) func() {
	start := ProcessCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(ProcessCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
