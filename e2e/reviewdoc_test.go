package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// docCurl is one curl command of a docs page's shell block.
type docCurl struct {
	method, url, body string
	reply             string // the "# -> " line(s) after it, "" when none
}

// reviewerWalkthrough is the curl commands of docs/review.md's "The
// reviewer: list, correct, approve" block, in order.
func reviewerWalkthrough(t *testing.T) []docCurl {
	t.Helper()
	block := testkit.DocBlock(t, "docs/review.md", "## The reviewer: list, correct, approve", "sh")
	cmd := regexp.MustCompile(`(?s)curl -s (-X POST )?"([^"]+)"(?:(?:\s*\\\n\s*| )-d '([^']*)')?((?:\n# -> [^\n]*(?:\n#  [^\n]*)*)?)`)
	var out []docCurl
	for _, m := range cmd.FindAllStringSubmatch(block, -1) {
		c := docCurl{method: http.MethodGet, url: m[2], body: m[3]}
		if m[1] != "" {
			c.method = http.MethodPost
		}
		if m[4] != "" {
			r := strings.TrimPrefix(strings.TrimSpace(m[4]), "# -> ")
			c.reply = regexp.MustCompile(`\n#\s+`).ReplaceAllString(r, " ")
		}
		out = append(out, c)
	}
	if len(out) < 6 {
		t.Fatalf("docs/review.md's reviewer block has %d curl commands, want list, get, check, approve, reject, rerun, export:\n%s", len(out), block)
	}
	return out
}

// demoConfig is examples/demo/contractd.yaml served from a temporary
// directory: its own ports and review store, the examples' schemas (the
// config reads them as ../000-edge/… beside it), and upstream as the model.
func demoConfig(t *testing.T, upstream string) string {
	t.Helper()
	examples, err := filepath.Abs(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, d := range []string{"000-edge", "001-registry", "002-triage", "003-refactor", "004-bmad"} {
		if err := os.Symlink(filepath.Join(examples, d), filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "demo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := readFile(t, filepath.Join(examples, "demo", "contractd.yaml"))
	cfg = edited(t, cfg, "listen: 127.0.0.1:18180", "listen: 127.0.0.1:0")
	cfg = edited(t, cfg, "admin_listen: 127.0.0.1:18190", "admin_listen: 127.0.0.1:0")
	cfg = edited(t, cfg, "base_url: http://127.0.0.1:18181/v1", "base_url: "+upstream)
	cfg = edited(t, cfg, "sink: stdout ", "sink: none ")
	return writeConfig(t, dir, cfg)
}

// TestReviewDocWalkthrough runs docs/review.md's reviewer walkthrough as
// written against the demo it says it uses (examples/demo/contractd.yaml):
// a classify-email item for the e-mail the walkthrough corrects is listed
// by its filters, the correction it checks is valid with the evidence the
// page shows, approving it resolves the item (the client's wait sees the
// correction), reject and rerun then find it resolved, and export lists it.
// The walkthrough once corrected with {"intent", "summary", "evidence"},
// which the demo's classify_v1 refuses on eight counts.
func TestReviewDocWalkthrough(t *testing.T) {
	t.Parallel()
	steps := reviewerWalkthrough(t)
	var check docCurl
	for _, s := range steps {
		if strings.HasSuffix(s.url, "/admin/check") {
			check = s
		}
	}
	var checkBody struct {
		Route  string          `json:"route"`
		Output json.RawMessage `json:"output"`
		Input  json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal([]byte(check.body), &checkBody); err != nil {
		t.Fatalf("the walkthrough's /admin/check body is not JSON: %v\n%s", err, check.body)
	}
	// The model labels the e-mail "Claim Report": the label rule the
	// walkthrough's list filters on.
	wrong := strings.Replace(string(checkBody.Output), `"claim_report"`, `"Claim Report"`, 1)
	up := newUpstream(t, func(upstreamRequest, int) reply { return reply{Content: wrong} })
	env := baseEnv()
	delete(env, "CONTRACTD_API_KEYS") // the demo has no keys
	d := startDaemon(t, demoConfig(t, up.URL()), env)

	body, _ := json.Marshal(map[string]any{"model": checkBody.Route, "messages": []any{}, "contract_input": checkBody.Input})
	resp, got := postAs(t, d, "", string(body))
	if resp.StatusCode != 422 {
		t.Fatalf("classify-email with the walkthrough's e-mail: status %d, want 422: %s", resp.StatusCode, got)
	}
	id, ok := storedReviewID(got)
	if !ok {
		t.Fatalf("the 422 names no stored review item: %s", got)
	}
	waited := make(chan map[string]any, 1)
	go func() {
		r, err := http.Get(d.BaseURL() + "/reviews/" + id + "?wait=30s")
		var m map[string]any
		if err == nil {
			_ = json.NewDecoder(r.Body).Decode(&m)
			r.Body.Close()
		}
		waited <- m
	}()

	admin := "http://" + d.Admin
	run := func(s docCurl) (int, []byte) {
		t.Helper()
		u := strings.ReplaceAll(strings.ReplaceAll(s.url, "$ADMIN", admin), "$ID", id)
		req, _ := http.NewRequest(s.method, u, strings.NewReader(s.body))
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", s.method, s.url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	resolved := false
	for _, s := range steps {
		status, b := run(s)
		what := s.method + " " + s.url
		switch {
		case strings.Contains(s.url, "/admin/reviews?"):
			if status != 200 || !strings.Contains(string(b), `"id":"`+id+`"`) {
				t.Errorf("%s: status %d, the item %s not listed: %s", what, status, id, b)
			}
		case strings.HasSuffix(s.url, "/admin/check"):
			var v struct {
				Valid      bool
				Violations []map[string]any
				Evidence   []struct {
					Path       string
					Start, End int
				}
			}
			var want struct {
				Evidence []struct {
					Path       string
					Start, End int
				}
			}
			if err := json.Unmarshal([]byte(s.reply), &want); err != nil {
				t.Fatalf("the walkthrough's check reply is not JSON: %v\n%s", err, s.reply)
			}
			if err := json.Unmarshal(b, &v); err != nil || status != 200 || !v.Valid {
				t.Fatalf("%s: status %d, not valid on the demo's contract: %s", what, status, b)
			}
			if len(v.Evidence) != len(want.Evidence) {
				t.Fatalf("%s: evidence %+v, the page shows %+v", what, v.Evidence, want.Evidence)
			}
			for i := range want.Evidence {
				if v.Evidence[i] != want.Evidence[i] {
					t.Errorf("%s: evidence %d is %+v, the page shows %+v", what, i, v.Evidence[i], want.Evidence[i])
				}
			}
		case strings.HasSuffix(s.url, "/approve"):
			if status != 200 || !strings.Contains(string(b), `"status":"approved"`) {
				t.Fatalf("%s: status %d: %s", what, status, b)
			}
			resolved = true
		case strings.HasSuffix(s.url, "/reject"), strings.HasSuffix(s.url, "/rerun"):
			if !resolved || status != 409 || !strings.Contains(string(b), "review_already_resolved") {
				t.Errorf("%s after the approval: status %d, want 409 review_already_resolved: %s", what, status, b)
			}
		case strings.Contains(s.url, "/admin/reviews/export"):
			if status != 200 || !strings.Contains(string(b), `"id":"`+id+`"`) {
				t.Errorf("%s: status %d, the approved item %s not exported: %s", what, status, id, b)
			}
		default:
			if status != 200 {
				t.Errorf("%s: status %d: %s", what, status, b)
			}
		}
	}
	if !resolved {
		t.Fatal("the walkthrough approved nothing")
	}
	w := <-waited
	res, _ := w["resolution"].(map[string]any)
	if w["status"] != "approved" || res == nil {
		t.Fatalf("the client's wait answered %v, want the approval", w)
	}
	out, _ := json.Marshal(res["output"])
	if !jsonEqual(out, checkBody.Output) {
		t.Errorf("the client's wait got output %s, want the walkthrough's correction %s", out, checkBody.Output)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	bx, _ := json.Marshal(y)
	return string(ax) == string(bx)
}
