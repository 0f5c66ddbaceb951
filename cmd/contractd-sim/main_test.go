package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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

// TestRunReloadsConfig: the simulator follows edits of its -config as
// contractd does, so under `make run` a contract's new label set (or a new
// route) is what its valid outputs use. It kept the catalog it started
// with: after the edit its "valid" outputs failed the new labels.
func TestRunReloadsConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "contractd.yaml")
	write := func(label string) {
		t.Helper()
		text := `upstreams: [{name: sim, base_url: "http://127.0.0.1:1/v1"}]
labels: [{name: kind, values: [` + label + `]}]
prompts: [{name: p, system: "Label it. {{ schema }}"}]
contracts:
  - name: k
    schema: {type: object, additionalProperties: false, required: [label], properties: {label: {type: string}}}
    policies: {labels: [{path: /label, set: kind}]}
routes: [{name: r, upstream: sim, model: m, prompt: p, contract: k, temperature: 0.7}]
`
		// Written beside and renamed over, as editors and deploy tools do.
		if err := os.WriteFile(cfg+".tmp", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfg+".tmp", cfg); err != nil {
			t.Fatal(err)
		}
	}
	write("alpha")
	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-config", cfg, "-latency", "0"}, &logs) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d", code)
		}
	}()
	logged := func(msg string) (string, int) {
		addr, n := "", 0
		for _, line := range strings.Split(logs.String(), "\n") {
			var l struct{ Msg, Kind, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
				addr, n = l.Addr, n+1
			}
		}
		return addr, n
	}
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		addr, _ = logged("listening")
	}
	if addr == "" {
		t.Fatalf("no listening line:\n%s", logs.String())
	}
	label := func() string {
		t.Helper()
		body := `{"model": "m", "sim_mode": "valid", "messages": [{"role": "system", "content": "Label it. {\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"label\"],\"properties\":{\"label\":{\"type\":\"string\"}}}"}, {"role": "user", "content": "x"}]}`
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("reply: %v", err)
		}
		var out struct{ Label string }
		if err := json.Unmarshal([]byte(c.Choices[0].Message.Content), &out); err != nil {
			t.Fatalf("content %q: %v", c.Choices[0].Message.Content, err)
		}
		return out.Label
	}
	if got := label(); got != "alpha" {
		t.Fatalf("label %q before the edit, want alpha", got)
	}
	write("beta")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, n := logged("config reloaded"); n > 0 {
			break
		}
	}
	if got := label(); got != "beta" {
		t.Fatalf("label %q after the edit, want beta (the reloaded label set):\n%s", got, logs.String())
	}
	// A config that does not load is logged; the running catalog stays.
	if err := os.WriteFile(cfg, []byte("routes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, n := logged("config reload failed; the old one kept"); n > 0 {
			break
		}
	}
	if _, n := logged("config reload failed; the old one kept"); n == 0 {
		t.Fatalf("no reload failure logged:\n%s", logs.String())
	}
	if got := label(); got != "beta" {
		t.Errorf("label %q after a config that does not load, want beta (kept)", got)
	}
}
