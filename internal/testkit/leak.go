package testkit

import (
	"os"
	"runtime"
	"strings"
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
	return settleCheck(t, false)
}

// LeakCheck is GoroutineCheck that also counts the process's open
// descriptors (/proc/self/fd: the test is skipped where there is none)
// and, when they do not settle back, lists what each one points to.
func LeakCheck(t testing.TB) func() {
	t.Helper()
	return settleCheck(t, true)
}

func settleCheck(t testing.TB, fds bool) func() {
	t.Helper()
	count := func() (goroutines, descriptors int) {
		if fds {
			descriptors = fdCount(t)
		}
		return runtime.NumGoroutine(), descriptors
	}
	g0, fd0 := count()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			g, fd := count()
			if g <= g0 && fd <= fd0 {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				if fds {
					t.Errorf("leak: goroutines %d -> %d, descriptors %d -> %d\nfds:%s\n%s", g0, g, fd0, fd, fdLinks(), buf)
				} else {
					t.Errorf("goroutine leak: %d before, %d after\n%s", g0, g, buf)
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// fdCount is the number of open descriptors of this process.
func fdCount(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents) - 1 // ReadDir's own descriptor
}

// fdLinks is " fd->target" for each open descriptor.
func fdLinks() string {
	var b strings.Builder
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			b.WriteString(" " + e.Name() + "->" + l)
		}
	}
	return b.String()
}
