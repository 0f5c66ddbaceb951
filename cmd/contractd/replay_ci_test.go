package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReplayCIRecipe runs the contractd steps of docs/replay.md's CI
// workflow as written, on a CI runner's terms: the serving config of the
// Kubernetes overlay (admin keys, a PostgreSQL DSN, a Redis URL and an
// upstream key, all named by *_env) and none of those variables set, as a
// pull request's job has none of the production secrets. Every step must
// exit 0 on a replay set that still passes. Before, the recipe's
// `contractd validate -c contractd.yaml` step exited 1 ("environment
// variable CONTRACTD_ADMIN_KEYS is not set", and the DSN's and Redis URL's),
// failing every pull request before replay ran.
func TestReplayCIRecipe(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "replay.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```yaml\n\\s*(# \\.github/workflows/.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/replay.md has no ```yaml block starting with # .github/workflows/")
	}
	var steps [][]string
	for _, m := range regexp.MustCompile(`(?m)^\s*- run: (contractd .*)$`).FindAllSubmatch(block[1], -1) {
		steps = append(steps, strings.Fields(string(m[1]))[1:])
	}
	if len(steps) == 0 || !strings.Contains(string(block[1]), "contractd replay") {
		t.Fatalf("no contractd replay step in the workflow:\n%s", block[1])
	}

	cfg, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "overlays", "postgres-redis", "contractd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"CONTRACTD_API_KEYS", "CONTRACTD_ADMIN_KEYS", "CONTRACTD_REVIEW_DSN", "CONTRACTD_REDIS_URL", "OPENAI_API_KEY", "CONTRACTD_CONFIG"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	dir := t.TempDir()
	approved := `{"id":"req_2327a338c027b1cd20c76566","route":"classify-email","contract":"classify_v1","input":{"subject":"Storm","body":"My window broke in the storm."},"output":{"intent":"claim_report"},"resolved_at":"2026-11-28T20:20:27.711439752Z"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "contractd.yaml"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "replay"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "replay", "approved.jsonl"), []byte(approved), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, args := range steps {
		if code, out, errb := runCmd(t, args...); code != 0 {
			t.Errorf("contractd %s: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errb)
		}
	}
}
