package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A hung dependency is not a down one: the kernel still accepts its
// connections and takes the bytes sent, and nothing ever answers. Freeze
// makes one by stopping the server's processes with SIGSTOP; Thaw (and the
// test's cleanup, whatever the test's outcome) sends SIGCONT.

// Frozen is a set of stopped processes, continued by Thaw or at cleanup.
type Frozen struct {
	pids []int
	done bool
}

// freeze stops root first (so that it forks nothing meanwhile), then every
// descendant, and registers their SIGCONT with t.Cleanup.
func freeze(t testing.TB, root int) *Frozen {
	t.Helper()
	f := &Frozen{}
	t.Cleanup(f.thaw)
	if err := syscall.Kill(root, syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze: SIGSTOP %d: %v", root, err)
	}
	f.pids = append(f.pids, root)
	for i := 0; i < len(f.pids); i++ {
		for _, c := range children(f.pids[i]) {
			if err := syscall.Kill(c, syscall.SIGSTOP); err == nil {
				f.pids = append(f.pids, c)
			}
		}
	}
	return f
}

// Thaw continues what Freeze stopped, children first.
func (f *Frozen) Thaw() { f.thaw() }

func (f *Frozen) thaw() {
	if f.done {
		return
	}
	f.done = true
	for i := len(f.pids) - 1; i >= 0; i-- {
		_ = syscall.Kill(f.pids[i], syscall.SIGCONT)
	}
}

// children lists pid's child processes (Linux: /proc/PID/task/*/children).
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// Freeze hangs the server: the postmaster and every backend stop
// (SIGSTOP) until Thaw or the end of the test.
func (p *OwnPostgres) Freeze(t testing.TB) *Frozen {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatalf("freeze postgres: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("freeze postgres: postmaster.pid: %v", err)
	}
	return freeze(t, pid)
}

// Freeze hangs the server: redis-server stops (SIGSTOP) until Thaw or the
// end of the test.
func (r *Redis) Freeze(t testing.TB) *Frozen {
	t.Helper()
	if r.cmd == nil || r.cmd.Process == nil {
		t.Fatal("freeze redis: not running")
	}
	kids := children(r.cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("freeze redis: no redis-server process under scripts/redis.sh")
	}
	f := &Frozen{}
	for _, k := range kids {
		g := freeze(t, k)
		f.pids = append(f.pids, g.pids...)
		g.done = true
	}
	t.Cleanup(f.thaw)
	return f
}
