package testkit

import (
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	n := 0
	if !WaitFor(time.Second, time.Millisecond, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("held after %d calls, want true after 3", n)
	}
	start := time.Now()
	calls := 0
	if WaitFor(20*time.Millisecond, 5*time.Millisecond, func() bool { calls++; return false }) {
		t.Error("a condition that never holds: true")
	}
	if time.Since(start) < 20*time.Millisecond || calls < 2 {
		t.Errorf("gave up after %v and %d calls, want at least the timeout", time.Since(start), calls)
	}
}
