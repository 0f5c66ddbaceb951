package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// replayConfig: a ticket route whose audit keeps content. maxLen is the
// summary's maxLength: the pull request's edit under test.
func replayConfig(upstream, audit string, maxLen string) string {
	return `
server: {listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0, api_keys_env: CONTRACTD_API_KEYS}
audit: {sink: file, path: ` + audit + `, include_content: true}
review: {store: none}
upstreams:
  - {name: up, base_url: "` + upstream + `", api_key_env: OPENAI_API_KEY, max_retries: 0}
prompts:
  - name: p
    system: "Summarise the ticket as one JSON object."
contracts:
  - name: k
    schema: {type: object, additionalProperties: false, required: [summary], properties: {summary: {type: string, maxLength: ` + maxLen + `}}}
routes:
  - {name: tickets, upstream: up, model: m, prompt: p, contract: k, temperature: 0.2}
`
}

// TestReplayBinary: the binary serves requests into an include_content
// audit; `contractd replay` with the same config finds nothing changed,
// with a tightened schema exits 1 naming the request; --live sends the
// stored requests again and stops cleanly on SIGINT with the summary of
// what ran.
func TestReplayBinary(t *testing.T) {
	t.Parallel()
	var hang atomic.Bool
	up := newUpstream(t, func(req upstreamRequest, n int) reply {
		if hang.Load() && bytes.Contains(req.Raw, []byte("HANG")) {
			return reply{Content: `{"summary":"x"}`, Delay: time.Minute}
		}
		msgs, _ := req.Body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		text, _ := last["content"].(string)
		return reply{Content: `{"summary":"` + strings.Fields(text)[0] + `"}`}
	})
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	cfg := filepath.Join(dir, "contractd.yaml")
	if err := os.WriteFile(cfg, []byte(replayConfig(up.URL(), auditPath, "100")), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, cfg, baseEnv())
	for _, text := range []string{"short", "a-rather-long-first-word", "HANG-later", "fine"} {
		body := `{"model":"tickets","messages":[{"role":"user","content":"` + text + ` ticket"}]}`
		req, _ := http.NewRequest(http.MethodPost, d.BaseURL()+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %q: %v %v", text, err, resp)
		}
		resp.Body.Close()
	}
	d.signal(syscall.SIGTERM)
	if code := d.wait(10 * time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}

	out, errOut, code := runCLIEnv(t, baseEnv(), "replay", "-c", cfg, "--audit", auditPath)
	if code != 0 || !strings.Contains(out, "offline replay: no regression") || strings.Contains(out, " -> ") {
		t.Fatalf("same config: exit %d\n%s%s", code, out, errOut)
	}
	tight := filepath.Join(dir, "tight.yaml")
	if err := os.WriteFile(tight, []byte(replayConfig(up.URL(), auditPath, "10")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLIEnv(t, baseEnv(), "replay", "-c", tight, "--audit", auditPath)
	if code != 1 || !regexp.MustCompile(`(?m)^req_[0-9a-f]+#1 tickets valid -> invalid: maxLength at /summary`).MatchString(out) ||
		strings.Count(out, " -> ") != 1 { // a-rather-long-first-word only
		t.Fatalf("tightened: exit %d\n%s%s", code, out, errOut)
	}

	// --live, interrupted: the third request hangs upstream; SIGINT stops
	// the run and the summary covers the two that ran.
	hang.Store(true)
	before := up.Hits()
	p := startProcess(t, baseEnv(), "replay", "-c", cfg, "--audit", auditPath, "--live", "--concurrency", "1")
	if !waitFor(10*time.Second, func() bool { return up.Hits()-before >= 3 }) {
		t.Fatalf("live replay did not reach the hanging request:\n%s", p.stderr)
	}
	p.signal(syscall.SIGINT)
	if code := p.wait(10 * time.Second); code != 0 {
		t.Fatalf("interrupted live replay: exit %d\n%s\n%s", code, p.stdout, p.stderr)
	}
	if s := p.stdout.String(); !strings.Contains(s, "live replay: no regression") || !regexp.MustCompile(`tickets\s+2\s+2\s`).MatchString(s) {
		t.Fatalf("stdout:\n%s", s)
	}
	if s := p.stderr.String(); !strings.Contains(s, "interrupted; the summary covers what ran (1 request(s) stopped in flight)") {
		t.Fatalf("stderr:\n%s", s)
	}
	if up.Hits()-before != 3 {
		t.Errorf("%d upstream calls after the interrupt, want 3", up.Hits()-before)
	}
}

// TestReplayStdinAndStableOutput: the binary reads --audit - from stdin,
// plain or gzip-compressed, with the same report as from the file; the
// report is byte-identical from run to run; every --json line is one JSON
// object; a regression exits 1 whichever way the set came in.
func TestReplayStdinAndStableOutput(t *testing.T) {
	t.Parallel()
	example, err := filepath.Abs(filepath.Join("..", "examples", "replay-ci"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, set := filepath.Join(example, "tightened.yaml"), filepath.Join(example, "approved.jsonl")
	raw, err := os.ReadFile(set)
	if err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	fromFile, errOut, code := runCLI(t, "", "replay", "-c", cfg, "--audit", set)
	if code != 1 || strings.Count(fromFile, " -> ") != 2 {
		t.Fatalf("from the file: exit %d\n%s%s", code, fromFile, errOut)
	}
	for name, in := range map[string]string{"stdin": string(raw), "gzip stdin": zipped.String()} {
		out, errOut, code := runCLI(t, in, "replay", "-c", cfg, "--audit", "-")
		if code != 1 || out != fromFile {
			t.Errorf("%s: exit %d, report differs from the file's:\n%s%s", name, code, out, errOut)
		}
	}
	again, _, _ := runCLI(t, "", "replay", "-c", cfg, "--audit", set)
	if again != fromFile {
		t.Errorf("two runs, two reports:\n%s\n%s", fromFile, again)
	}
	j1, _, code := runCLI(t, "", "replay", "-c", cfg, "--audit", set, "--json")
	j2, _, _ := runCLI(t, "", "replay", "-c", cfg, "--audit", set, "--json")
	if code != 1 || j1 != j2 {
		t.Fatalf("--json: exit %d, or two runs differ:\n%s\n%s", code, j1, j2)
	}
	lines := strings.Split(strings.TrimSuffix(j1, "\n"), "\n")
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("--json line %d is not a JSON object: %v\n%s", i+1, err, l)
		}
		if _, ok := m["summary"]; ok != (i == len(lines)-1) {
			t.Fatalf("--json line %d: the summary must be the last line, and only it", i+1)
		}
	}
}
