package replay

// Test harness: stored outputs are made by the real serving pipeline
// (proxy.Server over a fake upstream from internal/testkit) writing a real
// audit, so replay is tested against the format serving writes rather than
// hand-made lines.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
)

// The config: the shared e-mail classifier prompt (testkit.ClassifyPrompt,
// its role sentence per test), labels, evidence against /body and
// prompt_leak. {{SCHEMA}}, {{PROMPT}} and {{UPSTREAM}} are replaced per
// test.
const configTmpl = `
audit: {sink: none, include_content: {{CONTENT}}}
upstreams:
  - {name: up, base_url: "{{UPSTREAM}}", timeout: 5s, max_retries: 0}
labels:
  - {name: intent, values: [claim, billing, other]}
prompts:
{{PROMPT}}contracts:
  - name: classify_v1
    schema: {{SCHEMA}}
    policies:
      labels: [{path: /intent, set: intent}]
      evidence: [{path: /evidence/*, source: /body}]
      prompt_leak: true
routes:
  - {name: classify, upstream: up, model: m, prompt: classify, contract: classify_v1, temperature: 0.5}
  - {name: chat, upstream: up, model: m, passthrough: true}
`

const (
	baseSchema  = `{"type":"object","additionalProperties":false,"required":["intent","summary","evidence"],"properties":{"intent":{"type":"string"},"summary":{"type":"string","maxLength":200},"evidence":{"type":"array","items":{"type":"string"}}}}`
	tightSchema = `{"type":"object","additionalProperties":false,"required":["intent","summary","evidence"],"properties":{"intent":{"type":"string"},"summary":{"type":"string","maxLength":20},"evidence":{"type":"array","items":{"type":"string"}}}}`
	looseSchema = `{"type":"object","required":["intent"],"properties":{"intent":{"type":"string"}}}`
	baseSystem  = "You classify insurance e-mails for the claims desk of a large company."
)

type cfgOpts struct {
	schema, system, upstream string
	noContent                bool
	extraRoutes              string
}

func writeConfig(t *testing.T, dir string, o cfgOpts) (string, *config.Runtime) {
	t.Helper()
	y := configTmpl
	y = strings.ReplaceAll(y, "{{SCHEMA}}", testkit.Or(o.schema, baseSchema))
	y = strings.ReplaceAll(y, "{{PROMPT}}", testkit.ClassifyPrompt(testkit.Or(o.system, baseSystem)))
	y = strings.ReplaceAll(y, "{{UPSTREAM}}", testkit.Or(o.upstream, "http://127.0.0.1:9/v1"))
	y = strings.ReplaceAll(y, "{{CONTENT}}", map[bool]string{true: "false", false: "true"}[o.noContent])
	y += o.extraRoutes
	path := filepath.Join(dir, "contractd.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, err := config.Load(path)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, y)
	}
	return path, rt
}

// Outputs the fake upstream gives, chosen by a marker in the e-mail body.
var outputs = map[string]string{
	"SHORT":   `{"intent":"claim","summary":"window broke","evidence":["window broke"]}`,
	"LONG":    `{"intent":"claim","summary":"the customer reports a window broken by the storm","evidence":["window broke"]}`,
	"BADWORD": `{"intent":"refund","summary":"x","evidence":["window broke"]}`,
	"EXTRA":   `{"intent":"billing","summary":"charged twice","evidence":["charged twice"],"note":"x"}`,
	"LEAK":    `{"intent":"other","summary":"you classify insurance e-mails for the claims desk of a large company. Allowed intents","evidence":[]}`,
}

// upstreamByMarker answers with outputs[marker] for the marker found in
// the request; FLAKY answers invalid at temperature > 0 and SHORT at 0.
func upstreamByMarker(t *testing.T) *testkit.Upstream {
	return testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
		body := string(c.Body)
		out := outputs["SHORT"]
		for m, o := range outputs {
			if strings.Contains(body, "marker "+m) {
				out = o
			}
		}
		if strings.Contains(body, "marker FLAKY") && c.Temperature() > 0 {
			out = outputs["BADWORD"]
		}
		testkit.Reply(w, 200, testkit.Completion{ID: "c1", Model: "m", Content: out, PromptTokens: 10, CompletionTokens: 5}.JSON())
	})
}

// serveAudit sends one request per marker through the real server and
// returns the audit it wrote (one JSON line per request).
func serveAudit(t *testing.T, rt *config.Runtime, markers ...string) []byte {
	t.Helper()
	var buf testkit.SyncBuffer
	srv := proxy.NewServer(rt, proxy.NewCaller(func(*config.Upstream) string { return "sk-fake" }), audit.NewWriter(&buf), nil)
	h := srv.Handler(nil)
	for i, m := range markers {
		body := requestBody(i, m)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != 200 && rec.Code != 422 {
			t.Fatalf("request %d (%s): %d %s", i, m, rec.Code, rec.Body.String())
		}
	}
	return []byte(buf.String())
}

// servedAudit serves one request per marker through the base config over
// upstreamByMarker and returns the upstream, the config's directory, its
// runtime and the path of the audit written (dir/audit.jsonl).
func servedAudit(t *testing.T, markers ...string) (*testkit.Upstream, string, *config.Runtime, string) {
	t.Helper()
	up := upstreamByMarker(t)
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	return up, dir, rt, writeFile(t, dir, "audit.jsonl", serveAudit(t, rt, markers...))
}

func requestBody(i int, marker string) string {
	in := map[string]string{"subject": "Claim " + string(rune('A'+i%26)), "body": "marker " + marker + ": Hello, my window broke in the storm. I was charged twice too."}
	b, _ := json.Marshal(map[string]any{"model": "classify", "contract_input": in, "messages": []any{}})
	return string(b)
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runAudit replays files under rt and returns the summary, stdout, stderr.
func runAudit(t *testing.T, o Options, files ...string) (*Summary, string, string) {
	t.Helper()
	return runReplay(t, o, func(o Options) (*Summary, error) { return Audit(context.Background(), o, files) })
}

// runReplay runs one replay (Audit or Reviews) with o writing to buffers
// and returns the summary, stdout, stderr; an error fails the test.
func runReplay(t *testing.T, o Options, run func(Options) (*Summary, error)) (*Summary, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	o.Out, o.Err = &out, &errb
	s, err := run(o)
	if err != nil {
		t.Fatalf("replay: %v\nstderr:\n%s", err, errb.String())
	}
	return s, out.String(), errb.String()
}

// jsonItems parses --json output: the items, then the summary.
func jsonItems(t *testing.T, out string) ([]Item, Summary) {
	t.Helper()
	var items []Item
	var sum Summary
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("json output: %v\n%s", err, out)
		}
		if s, ok := raw["summary"]; ok {
			if err := json.Unmarshal(s, &sum); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, _ := json.Marshal(raw)
		var it Item
		if err := json.Unmarshal(b, &it); err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	return items, sum
}

// checkNoLeak fails when goroutines started by the test outlive it.
func checkNoLeak(t *testing.T) {
	t.Helper()
	t.Cleanup(testkit.GoroutineCheck(t))
}

func loadPath(t *testing.T, path string) *config.Runtime {
	t.Helper()
	rt, err := config.Load(path)
	if err != nil {
		t.Fatalf("config %s: %v", path, err)
	}
	return rt
}
