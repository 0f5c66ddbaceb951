package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestReplayExample is the worked example of docs/replay.md: the approved
// outputs exported into examples/replay-ci replay clean under the current
// config (exit 0), and the pull request's tightened schema makes replay
// exit 1 naming the approved outputs it would reject (expected-pr.txt).
func TestReplayExample(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "replay-ci")
	approved := filepath.Join(dir, "approved.jsonl")
	code, out, errb := runCmd(t, "replay", "-c", filepath.Join(dir, "contractd.yaml"), "--audit", approved)
	if code != 0 || !strings.Contains(out, "offline replay: no regression") || strings.Contains(out, " -> ") {
		t.Fatalf("current config: exit %d\n%s%s", code, out, errb)
	}
	code, out, errb = runCmd(t, "replay", "-c", filepath.Join(dir, "tightened.yaml"), "--audit", approved)
	want, err := os.ReadFile(filepath.Join(dir, "expected-pr.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if code != 1 || out != string(want) || errb != "" {
		t.Fatalf("tightened: exit %d, want 1\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", code, out, want, errb)
	}
	for _, id := range []string{"req_7d21e6b0c9a84f13b5d2e7a0#approved", "req_a6e0d4c2b8f1937e5a2c0d4b#approved"} {
		if !strings.Contains(out, id+" triage approved -> invalid: maxLength at /summary") {
			t.Errorf("the regression does not name %s", id)
		}
	}
	// --json: every item, then the summary.
	code, out, _ = runCmd(t, "replay", "-c", filepath.Join(dir, "tightened.yaml"), "--audit", approved, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 7 {
		t.Fatalf("--json: exit %d, %d lines\n%s", code, len(lines), out)
	}
	var sum struct {
		Summary struct {
			Regressed bool `json:"regressed"`
			Total     struct {
				Items        int `json:"items"`
				NewlyInvalid int `json:"newly_invalid"`
			} `json:"total"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(lines[6]), &sum); err != nil || !sum.Summary.Regressed || sum.Summary.Total.Items != 6 || sum.Summary.Total.NewlyInvalid != 2 {
		t.Fatalf("summary line %s: %v", lines[6], err)
	}
}

// TestReplayUsage: usage and config errors exit 2 with a message on
// stderr and nothing on stdout; a config that does not validate prints the
// validate messages.
func TestReplayUsage(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join("..", "..", "examples", "replay-ci")
	cfg := filepath.Join(example, "contractd.yaml")
	approved := filepath.Join(example, "approved.jsonl")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("contracts:\n  - name: k\n    schema: {type: object, properties: {a: {$ref: 'https://example.com/x.json'}}}\nroutes:\n  - {name: r, upstream: nope, model: m, prompt: p, contract: k, temperature: 0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var validateOut bytes.Buffer
	if code := run(context.Background(), []string{"validate", "-c", bad}, &validateOut, &bytes.Buffer{}); code != 1 {
		t.Fatalf("validate exit %d", code)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no source", []string{"-c", cfg}, "give exactly one source"},
		{"both sources", []string{"-c", cfg, "--reviews", "--audit", approved}, "give exactly one source"},
		{"extra argument", []string{"-c", cfg, "--audit", approved, "x"}, `unexpected argument "x"`},
		{"unknown route", []string{"-c", cfg, "--audit", approved, "--route", "nope"}, `--route "nope": not a contract route`},
		{"bad since", []string{"-c", cfg, "--audit", approved, "--since", "yesterday"}, "--since yesterday: want a duration"},
		{"missing audit", []string{"-c", cfg, "--audit", filepath.Join(dir, "none.jsonl")}, "none.jsonl: no such file"},
		{"audit is a directory", []string{"-c", cfg, "--audit", dir}, "is a directory"},
		{"invalid config", []string{"-c", bad, "--audit", approved}, "does not validate"},
		{"no store", []string{"-c", writeTemp(t, dir, "nostore.yaml", "review: {store: none}\ncontracts:\n  - {name: k, schema: {type: object}}\n"), "--reviews"}, "review.store is none"},
		{"missing sqlite store", []string{"-c", writeTemp(t, dir, "sq.yaml", "review: {store: sqlite, path: missing.db}\ncontracts:\n  - {name: k, schema: {type: object}}\n"), "--reviews"}, "missing.db: no such file or directory"},
		{"live without key", []string{"-c", cfg, "--audit", approved, "--live"}, "OPENAI_API_KEY (api_key_env) is not set"},
		{"bad concurrency", []string{"-c", cfg, "--audit", approved, "--live", "--concurrency", "0"}, "--concurrency must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "live without key" {
				t.Setenv("OPENAI_API_KEY", "")
				os.Unsetenv("OPENAI_API_KEY")
			}
			code, out, errb := runCmd(t, append([]string{"replay"}, tc.args...)...)
			if code != 2 || out != "" || !strings.Contains(errb, tc.want) {
				t.Fatalf("exit %d, want 2; stdout %q; stderr lacks %q:\n%s", code, out, tc.want, errb)
			}
			if tc.name == "invalid config" {
				for _, l := range strings.Split(strings.TrimSpace(validateOut.String()), "\n") {
					if !strings.Contains(errb, l) {
						t.Errorf("stderr lacks the validate message %q:\n%s", l, errb)
					}
				}
			}
		})
	}
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"24h":                  now.Add(-24 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"2026-11-20T10:00:00Z": time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1h", "yesterday", "2026-11-20"} {
		if _, err := parseSince(in, now); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// TestReplayReviewsStore: --reviews opens the config's store (the same
// opener serve uses) and judges its approved outputs.
func TestReplayReviewsStore(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st := storetest.OpenSQLite(t, filepath.Join(dir, "reviews.db"))
	it := &review.Item{ID: "req_1", Status: review.StatusPending, CreatedAt: time.Now().UTC(), Route: "r",
		Input: json.RawMessage(`"hello"`), Request: json.RawMessage(`{"model":"r","messages":[{"role":"user","content":"hello"}]}`),
		Attempts: []review.Attempt{{AttemptReport: review.AttemptReport{Attempt: 1, Violations: []contracts.Violation{{Kind: "schema", Rule: "x"}}}, Output: `{"a":"toolong"}`, OutputSHA256: "x"}}}
	if _, err := st.Create(ctx, it, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Resolve(ctx, "req_1", review.Resolve{Status: review.StatusApproved, At: time.Now().UTC(),
		Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "ann", Output: json.RawMessage(`{"a":"toolong"}`)}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	cfg := func(maxLen string) string {
		return writeTemp(t, dir, "c"+maxLen+".yaml", `review: {store: sqlite, path: reviews.db}
upstreams: [{name: up, base_url: "http://127.0.0.1:9/v1"}]
prompts: [{name: p, system: "Answer in JSON."}]
contracts:
  - {name: k, schema: {type: object, required: [a], properties: {a: {type: string, maxLength: `+maxLen+`}}}}
routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 0}]
`)
	}
	code, out, errb := runCmd(t, "replay", "-c", cfg("100"), "--reviews")
	if code != 0 || !strings.Contains(out, "req_1#1 r invalid -> valid") {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	code, out, errb = runCmd(t, "replay", "-c", cfg("3"), "--reviews", "--route", "r", "--since", "1h")
	if code != 1 || !strings.Contains(out, "req_1#approved r approved -> invalid: maxLength at /a") {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
}

// TestReplayReviewsReadsOnly: replay is a reader. On a store at an older
// schema level it exits 2 saying to upgrade it with contractd serve, and
// changes nothing: not the database's bytes, not its mode (0644, which
// serve makes 0600), not its recorded migrations. Serve's opener migrated
// and chmodded it.
func TestReplayReviewsReadsOnly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "reviews.db")
	storetest.OpenSQLite(t, file).Close()
	// One level back, as a store an older contractd last opened.
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		t.Fatal(err)
	}
	var level int
	if err := db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&level); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version = ?`, level); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeTemp(t, dir, "c.yaml", "review: {store: sqlite, path: reviews.db}\ncontracts:\n  - {name: k, schema: {type: object}}\n")
	code, out, errb := runCmd(t, "replay", "-c", cfg, "--reviews")
	want := fmt.Sprintf("is at schema level %d (%d of %d migrations applied), older than this contractd's %d: upgrade it by starting contractd serve", level-1, level-1, level, level)
	if code != 2 || out != "" || !strings.Contains(errb, want) {
		t.Errorf("exit %d, want 2; stdout %q; stderr lacks %q:\n%s", code, out, want, errb)
	}
	after, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the database's bytes changed")
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644 kept", fi.Mode(), err)
	}
	db, err = sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var now int
	if err := db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&now); err != nil || now != level-1 {
		t.Errorf("schema level %d (%v), want %d kept", now, err, level-1)
	}
}
