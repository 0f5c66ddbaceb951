package testkit

import (
	"runtime"
	"testing"
	"time"
)

// GoroutineCheck counts goroutines now and returns the check: it waits up
// to 5 s for the count to settle back (servers and connections wind down
// asynchronously) and fails the test with every goroutine's stack if it
// does not. Call it with defer, or pass it to t.Cleanup before registering
// the cleanups it must run after.
func GoroutineCheck(t testing.TB) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
