package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// contractd is the daemon under test, a subprocess.
type contractd struct {
	cmd    *exec.Cmd
	api    string // http://host:port
	admin  string
	logf   *os.File
	exited chan struct{}
	err    error
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// findOrBuild returns the contractd binary: bin, if given or present at
// bin/contractd under the module root, else a fresh build in dir.
func findOrBuild(bin string, rebuild bool, dir string) (string, bool, error) {
	if bin != "" && !rebuild {
		if _, err := os.Stat(bin); err == nil {
			return bin, false, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", false, err
	}
	if !rebuild {
		if p := filepath.Join(root, "bin", "contractd"); isExec(p) {
			return p, false, nil
		}
	}
	out := filepath.Join(dir, "contractd")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/contractd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", false, fmt.Errorf("go build ./cmd/contractd: %w", err)
	}
	return out, true, nil
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// moduleRoot walks up from the working directory to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// startContractd writes the config and starts bin serve on free ports,
// waiting until /readyz answers.
func startContractd(bin, dir, upstreamURL, logLevel, gogc string, logBesideConfig bool) (*contractd, error) {
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// The config sits in a directory of its own and the log in another:
	// contractd watches the config and what it references, and nothing
	// the run writes belongs beside them.
	cfgDir, logDir := filepath.Join(dir, "config"), filepath.Join(dir, "logs")
	if logBesideConfig { // to measure what a log beside the config costs
		logDir = cfgDir
	}
	for _, d := range []string{cfgDir, logDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cfg := filepath.Join(cfgDir, "contractd.yaml")
	if err := os.WriteFile(cfg, []byte(configYAML(api, admin, upstreamURL, logLevel)), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(logDir, "contractd.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "-c", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = cleanEnv()
	if gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+gogc)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	c := &contractd{cmd: cmd, api: "http://" + api, admin: "http://" + admin, logf: logf, exited: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-c.exited:
			return nil, fmt.Errorf("contractd exited at start (%v):\n%s", c.err, c.logTail())
		default:
		}
		resp, err := http.Get(c.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return c, nil
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("contractd not ready after 20s:\n%s", c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cleanEnv is the environment minus what would change contractd's
// behaviour under test (OTLP export, log overrides, config path).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "CONTRACTD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (c *contractd) pid() int { return c.cmd.Process.Pid }

// stop sends SIGTERM (a clean drain), then SIGKILL after 10 s.
func (c *contractd) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.logf.Close()
}

func (c *contractd) logTail() string {
	b, _ := os.ReadFile(c.logf.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// procStatus reads a kB field (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// resetPeak resets the kernel's peak-RSS mark (VmHWM) of pid, so the next
// reading is the peak of the phase that follows (Linux: clear_refs 5).
func resetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// rssSampler polls VmRSS; it backs VmHWM up where clear_refs is refused.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func sampleRSS(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v, err := procStatus(pid, "VmRSS"); err == nil && v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *rssSampler) Stop() int64 {
	close(s.stop)
	s.wg.Wait()
	return s.peak.Load()
}

// machine describes where the run happened.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	mem := ""
	if v, err := procMem(); err == nil {
		mem = fmt.Sprintf(", %.1f GiB RAM", float64(v)/(1<<30))
	}
	return fmt.Sprintf("%s, %d CPUs%s, Linux %s, %s %s/%s", cpu, runtime.NumCPU(), mem,
		strings.TrimSpace(string(kernel)), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func procMem() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n * 1024, err
		}
	}
	return 0, io.EOF
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuTime is the user+system CPU time of pid so far (/proc/<pid>/stat).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 (1-based) of the whole line.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}
