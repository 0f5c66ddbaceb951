package testkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RedisURLEnv names a Redis the tests may use instead of starting one.
const RedisURLEnv = "CONTRACTD_TEST_REDIS_URL"

var shared struct {
	server sharedServer
	// r stays referenced: were it collected, the finalizer of its stdin
	// pipe would close it and stop the server mid-run.
	r *Redis
}

// RedisURL is the Redis this test binary shares: CONTRACTD_TEST_REDIS_URL,
// or a throwaway server started through scripts/redis.sh (which installs
// redis-server when missing) the first time a test asks. That server stops
// when the test binary exits. A Redis that cannot be had fails the test:
// tests never skip for want of a server.
func RedisURL(t testing.TB) string {
	t.Helper()
	return shared.server.get(t, "redis", RedisURLEnv, func() (string, error) {
		// Kept for the process's lifetime: its stdin closes when the
		// binary exits and the script stops the server.
		r, err := startRedis(0)
		if err != nil {
			return "", err
		}
		shared.r = r
		return r.URL, nil
	})
}

// Redis is a throwaway redis-server one test owns, for tests that stop and
// restart it.
type Redis struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	in   io.WriteCloser
	errb *SyncBuffer
}

// StartRedis starts a redis-server of the test's own through
// scripts/redis.sh, on port (0: a free one), stopped at the end of the test.
func StartRedis(t testing.TB, port int) *Redis {
	t.Helper()
	r, err := startRedis(port)
	if err != nil {
		t.Fatalf("start redis: %v", err)
	}
	t.Cleanup(r.Stop)
	return r
}

func startRedis(port int) (*Redis, error) {
	script, err := repoFile("scripts/redis.sh")
	if err != nil {
		return nil, err
	}
	args := []string{script}
	if port > 0 {
		args = append(args, fmt.Sprint(port))
	}
	cmd := exec.Command("bash", args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r := &Redis{cmd: cmd, in: in, errb: &SyncBuffer{}}
	cmd.Stderr = r.errb
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line := Lines(out, 1) // the script writes one line, the URL
	// Installing the package on a fresh machine takes a while; starting
	// takes well under a second.
	select {
	case u, ok := <-line:
		if ok && strings.HasPrefix(u, "redis://") {
			r.URL = u
			_, _ = fmt.Sscanf(u[strings.LastIndexByte(u, ':')+1:], "%d", &r.Port)
			return r, nil
		}
	case <-time.After(5 * time.Minute):
	}
	r.Stop()
	return nil, fmt.Errorf("scripts/redis.sh gave no URL: %s", strings.TrimSpace(r.errb.String()))
}

// Stop stops the server (closing the script's stdin) and waits for it.
func (r *Redis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.in.Close()
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

// repoFile finds rel in the repository, walking up from the working
// directory (a test's directory is its package's).
func repoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(rel + " not found above the working directory")
		}
		dir = parent
	}
}
