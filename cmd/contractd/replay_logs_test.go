package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplaySkipsServeLogLines: with audit.sink: stdout (the deploy kits'
// setting) the audit reaches the operator mixed with serve's log lines
// (kubectl logs, journalctl -o cat). Replaying such a file judges the
// audit's outputs and skips the log lines, counted in "skipped" like other
// lines without outputs; before, each log line was reported as unreadable
// ("not a readable JSON line: … cannot unmarshal JSON number into …
// /attempts" for the request line, "neither an audit event nor a review
// export line" for the others) and the run ended with "N unreadable
// line(s)".
func TestReplaySkipsServeLogLines(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "replay-ci")
	approved, err := os.ReadFile(filepath.Join(example, "approved.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	logs := []string{
		`{"time":"2026-11-28T20:20:16.418767184Z","level":"INFO","msg":"telemetry","traces":"none","metrics":"/metrics"}`,
		`{"time":"2026-11-28T20:20:17.01570141Z","level":"INFO","msg":"config loaded","sha256":"c596f05c713fd7b5a7921be9e6617fec7dfd912a4000d0277c655a1f2b7ce5a2","routes":1}`,
		`{"time":"2026-11-28T20:20:23.89044251Z","level":"INFO","msg":"request","request_id":"req_2327a338c027b1cd20c76566","route":"triage","outcome":"needs_review","status":422,"attempts":2,"duration_ms":22.307,"error_code":"contract_violation"}`,
		`{"time":"2026-11-28T20:21:17.522757168Z","level":"ERROR","msg":"review store write failed; spooling","review_id":"req_407c468401a453933a6347ce","error":"review store: create: connection refused"}`,
		`time=2026-11-28T20:22:34.457Z level=INFO msg=draining timeout=20s`,
	}
	var mixed strings.Builder
	for i, l := range strings.SplitAfter(strings.TrimSuffix(string(approved), "\n"), "\n") {
		mixed.WriteString(logs[i%len(logs)] + "\n")
		mixed.WriteString(strings.TrimSuffix(l, "\n") + "\n")
	}
	for _, l := range logs {
		mixed.WriteString(l + "\n")
	}
	p := filepath.Join(t.TempDir(), "pod.log")
	if err := os.WriteFile(p, []byte(mixed.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(example, "contractd.yaml")
	code, out, errb := runCmd(t, "replay", "-c", cfg, "--audit", p)
	if code != 0 || errb != "" || !strings.Contains(out, "offline replay: no regression") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	}
	code, out, errb = runCmd(t, "replay", "-c", cfg, "--audit", p, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var sum struct {
		Summary struct {
			Total      struct{ Items int } `json:"total"`
			Unreadable int                 `json:"unreadable"`
			Skipped    int                 `json:"skipped"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatalf("exit %d, summary %q: %v\n%s", code, lines[len(lines)-1], err, errb)
	}
	items := strings.Count(string(approved), "\n")
	logLines := items + len(logs)
	if code != 0 || sum.Summary.Total.Items != items || sum.Summary.Unreadable != 0 || sum.Summary.Skipped != logLines {
		t.Fatalf("exit %d, %d items (want %d), %d unreadable (want 0), %d skipped (want %d)\n%s", code,
			sum.Summary.Total.Items, items, sum.Summary.Unreadable, sum.Summary.Skipped, logLines, errb)
	}
}
