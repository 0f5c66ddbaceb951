package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// FreeAddr is a loopback address nothing listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Daemon is a contractd process serving a config; it is killed when the
// test ends.
type Daemon struct {
	Cmd *exec.Cmd
	Log *SyncBuffer // its standard error: the JSON log lines
}

// StartDaemon runs `bin serve -c config` with env added to this process's
// environment and waits up to 15 s until each of addrs (its listeners)
// accepts connections.
func StartDaemon(t testing.TB, bin, config string, env []string, addrs ...string) *Daemon {
	t.Helper()
	d := &Daemon{Cmd: exec.Command(bin, "serve", "-c", config), Log: &SyncBuffer{}}
	d.Cmd.Env = append(os.Environ(), env...)
	d.Cmd.Stderr = d.Log
	if err := d.Cmd.Start(); err != nil {
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
}
