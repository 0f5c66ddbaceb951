package e2e

import (
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A collector that accepts connections and never answers must not hold
// the exit after the drain: the last span export is bounded (5 s), so a
// stop fits the grace period deploy/ budgets (Kubernetes'
// terminationGracePeriodSeconds, systemd's TimeoutStopSec) instead of
// waiting out the exporter's own 30 s and being killed, and the process
// still exits 0.
func TestStopWithHungOTLPCollector(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	up := newUpstream(t, byModel)
	env := baseEnv()
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://" + ln.Addr().String()
	d := startDaemon(t, writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()})), env)
	// A request leaves a span to export at shutdown.
	req, _ := http.NewRequest(http.MethodGet, d.BaseURL()+"/models", nil)
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	d.signal(syscall.SIGTERM)
	code := d.wait(25 * time.Second)
	took := time.Since(start)
	select {
	case <-accepted:
	default:
		t.Fatal("contractd never connected to the collector: the test proves nothing")
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if took > 10*time.Second {
		t.Errorf("exit %v after SIGTERM with nothing in flight, want under 10 s (the span export bounded at 5 s)", took.Round(time.Millisecond))
	}
}
