package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
)

// reloadCounts counts reloads by result, and panics by where.
type reloadCounts struct {
	mu                sync.Mutex
	ok, failed        int
	panicsConfigWatch int
}

func (c *reloadCounts) ConfigReload(ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.ok++
	} else {
		c.failed++
	}
}

func (c *reloadCounts) Panic(where string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if where == proxy.PanicConfigWatch {
		c.panicsConfigWatch++
	}
}

func (c *reloadCounts) get() (ok, failed, panics int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok, c.failed, c.panicsConfigWatch
}

// A panic while reloading is logged (type, description, stack; not the
// value), counted, and taken as a refused reload: the running config
// stays and the loop goes on, so the next SIGHUP is still handled.
// (Before: the panic ended the process.) Here the audit switch the
// reload reopens is missing, so reopening it panics at every reload.
func TestReloadPanicKeepsWatching(t *testing.T) {
	path := filepath.Join(t.TempDir(), "contractd.yaml")
	if err := os.WriteFile(path, []byte(`audit:
  sink: none
upstreams:
  - name: up
    base_url: http://127.0.0.1:1/v1
routes:
  - name: raw
    upstream: up
    model: m
    passthrough: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	srv := proxy.NewServer(rt, nil, nil, logger)
	counts := &reloadCounts{}
	srv.Panics = counts
	rw := &reloadWatch{hup: make(chan os.Signal, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchReload(ctx, rw, path, live{srv: srv, level: new(slog.LevelVar)}, counts, logger)
	}()
	defer func() { cancel(); <-done }()

	for want := 1; want <= 2; want++ {
		rw.hup <- syscall.SIGHUP
		end := time.Now().Add(5 * time.Second)
		for _, failed, _ := counts.get(); failed < want && time.Now().Before(end); _, failed, _ = counts.get() {
			time.Sleep(5 * time.Millisecond)
		}
		if ok, failed, panics := counts.get(); ok != 0 || failed != want || panics != want {
			t.Fatalf("after SIGHUP %d: %d reloads ok, %d failed, %d panics counted; want 0, %d, %d", want, ok, failed, panics, want, want)
		}
	}
	if srv.Runtime() != rt {
		t.Error("the running config was replaced")
	}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "panic while reloading the config") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if line == nil || line["level"] != "ERROR" || line["panic_type"] != "runtime.errorString" ||
		!strings.Contains(line["panic"].(string), "nil pointer dereference") || !strings.Contains(line["stack"].(string), "audit.(*Switch).Reopen") {
		t.Errorf("panic line: %v\n%s", line, logs)
	}
}
