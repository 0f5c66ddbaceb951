//go:build linux

package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonChildEnv names the stand-in daemon in the child process of
// TestDaemonDiesWithPanickingTest, which starts it and panics.
const daemonChildEnv = "TESTKIT_DAEMON_PANIC_CHILD"

// panickingChild starts a daemon, prints its pid and panics in another
// goroutine, as a -test.timeout or a handler's panic does: the process
// dies without the test's cleanups (Daemon.Stop). (A panic in the test's
// own goroutine runs them: testing recovers it first.)
func panickingChild(t *testing.T, bin string) {
	d := StartDaemon(t, bin, "unused.yaml", nil)
	fmt.Printf("daemon-pid=%d\n", d.Cmd.Process.Pid)
	// Another goroutine's thread-locked work ending must not take the
	// daemon with it: only the test process's death does.
	done := make(chan struct{})
	go func() { defer close(done); lockAndExit() }()
	<-done
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(d.Cmd.Process.Pid, 0); err != nil {
		fmt.Printf("daemon gone before the panic: %v\n", err)
	}
	go panic("the test panics: its cleanups (Daemon.Stop) do not run")
	select {}
}

// A test that panics never runs Daemon.Stop; the daemon StartDaemon
// started must be gone once the test process is.
func TestDaemonDiesWithPanickingTest(t *testing.T) {
	if bin := os.Getenv(daemonChildEnv); bin != "" {
		panickingChild(t, bin)
		return
	}
	// A stand-in daemon: serve -c FILE is ignored, it only waits.
	bin := filepath.Join(t.TempDir(), "daemon.sh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 120\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDaemonDiesWithPanickingTest$", "-test.count", "1")
	cmd.Env = append(os.Environ(), daemonChildEnv+"="+bin)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(out.String()+stderr.String(), "the test panics") {
		t.Fatalf("the child did not panic: %v\n%s\n%s", err, out.Bytes(), stderr.Bytes())
	}
	_, rest, ok := strings.Cut(out.String(), "daemon-pid=")
	line, _, _ := strings.Cut(rest, "\n")
	pid, perr := strconv.Atoi(line)
	if !ok || perr != nil || pid <= 0 {
		t.Fatalf("no daemon pid from the child:\n%s", out.Bytes())
	}
	if strings.Contains(out.String(), "daemon gone before the panic") {
		t.Errorf("the daemon died before its test process did:\n%s", out.Bytes())
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ours: the child's daemon
			t.Fatalf("daemon %d still running 5 s after its test process panicked", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockAndExit locks its goroutine's thread and returns without unlocking:
// Go then ends that thread.
func lockAndExit() { runtime.LockOSThread() }

// alive: pid exists and is not a zombie waiting for its reaper.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := bytes.Cut(b, []byte(") "))
	return len(after) > 0 && after[0] != 'Z'
}
