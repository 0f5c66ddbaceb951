package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// ModuleRoot is the directory of this module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// moduleRoot asks the go command once: every test binary runs inside the
// module.
var moduleRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command(GoTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := string(bytes.TrimSpace(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("the working directory is not inside a Go module")
	}
	return filepath.Dir(mod), nil
})

// GoBuild builds ./cmd/contractd of the source tree in dir into out.
func GoBuild(t testing.TB, dir, out string) {
	t.Helper()
	cmd := exec.Command(GoTool(), "build", "-trimpath", "-o", out, "./cmd/contractd")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, b)
	}
}

// BuildContractd builds this module's contractd binary into a temporary
// directory of the test and returns its path.
func BuildContractd(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "contractd")
	GoBuild(t, ModuleRoot(t), bin)
	return bin
}

// FreeAddrs is n loopback addresses nothing listened on a moment ago, all
// different: each is held until every one is chosen, since the kernel may
// hand a port it just freed out again (a daemon's API and admin listeners
// once got the same one, and the second failed to bind).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// Daemon is a contractd process serving a config; it is killed when the
// test ends, and on Linux also when the test process dies without its
// cleanups (a panic, a timeout, a kill): see StartDaemon.
type Daemon struct {
	Cmd *exec.Cmd
	Log *SyncBuffer // its standard error: the JSON log lines

	stopOnce sync.Once
	stopped  chan struct{} // closed by Stop: the starting thread may exit
}

// StartDaemon runs `bin serve -c config` with env added to this process's
// environment and waits up to 15 s until each of addrs (its listeners)
// accepts connections.
//
// A test that panics skips its cleanups, so Stop alone would leave the
// daemon running. On Linux the daemon gets SIGKILL when its starter dies
// (PR_SET_PDEATHSIG, SysProcAttr.Pdeathsig). The kernel sends it when the
// starting thread exits, not the process (go.dev/issue/27505), and Go may
// end an idle thread: the daemon is started from a goroutine locked to its
// thread until Stop, so that thread lives exactly as long as the daemon is
// wanted and dies with the test process.
func StartDaemon(t testing.TB, bin, config string, env []string, addrs ...string) *Daemon {
	t.Helper()
	d := &Daemon{Cmd: exec.Command(bin, "serve", "-c", config), Log: &SyncBuffer{}, stopped: make(chan struct{})}
	d.Cmd.Env = append(os.Environ(), env...)
	d.Cmd.Stderr = d.Log
	killWithStarter(d.Cmd)
	started := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine returns (after Stop), its
		// thread exits, and with it the parent-death signal's trigger.
		runtime.LockOSThread()
		err := d.Cmd.Start()
		started <- err
		if err == nil {
			<-d.stopped
		}
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	deadline := time.Now().Add(15 * time.Second)
	for _, addr := range addrs {
		for {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("contractd did not listen on %s: %s", addr, d.Log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return d
}

// Stop kills the process and waits for it; it may be called more than once.
func (d *Daemon) Stop() {
	if d.Cmd.ProcessState == nil && d.Cmd.Process != nil {
		_ = d.Cmd.Process.Kill()
		_ = d.Cmd.Wait()
	}
	if d.stopped != nil {
		d.stopOnce.Do(func() { close(d.stopped) })
	}
}

// MainBinary is the contractd binary a TestMain runs its suite against:
// the one CONTRACTD_E2E_BIN names (made absolute), else ./cmd/contractd of
// the module at root built (with ldflags, when not empty) into a temporary
// directory that cleanup removes. builtBy says which: "CONTRACTD_E2E_BIN"
// or "TestMain". cleanup is never nil.
func MainBinary(root, ldflags string) (bin, builtBy string, cleanup func(), err error) {
	cleanup = func() {}
	if p := os.Getenv("CONTRACTD_E2E_BIN"); p != "" {
		bin, err = filepath.Abs(p)
		return bin, "CONTRACTD_E2E_BIN", cleanup, err
	}
	dir, err := os.MkdirTemp("", "contractd-bin-")
	if err != nil {
		return "", "", cleanup, err
	}
	bin = filepath.Join(dir, "contractd")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"build", "-trimpath"}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.CommandContext(ctx, GoTool(), append(args, "-o", bin, "./cmd/contractd")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", "", cleanup, fmt.Errorf("building contractd: %v\n%s", err, out)
	}
	return bin, "TestMain", func() { os.RemoveAll(dir) }, nil
}
