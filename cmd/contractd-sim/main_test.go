package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

func TestRunServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-config", "../../examples/demo/contractd.yaml", "-latency", "0"}, &logs)
	}()
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == "" && time.Now().Before(deadline); {
		for _, line := range strings.Split(logs.String(), "\n") {
			var l struct{ Msg, Kind, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.Kind == "sim" {
				addr = l.Addr
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if addr == "" {
		t.Fatalf("no listening line:\n%s", logs.String())
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-failure-rate", "2"}, {"-weights", "nope=1"}, {"extra"}} {
		var logs testkit.SyncBuffer
		if code := run(context.Background(), args, &logs); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	var logs testkit.SyncBuffer
	if code := run(context.Background(), []string{"-config", "does-not-exist.yaml"}, &logs); code != 1 {
		t.Errorf("missing config: exit %d, want 1", code)
	}
}
