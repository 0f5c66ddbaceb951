package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// The real binary answers an identical repeat of a needs_review request
// from the dedupe window: same review, no upstream call, an audit line
// marked deduplicated, and the cache's size on /metrics.
func TestDedupeRealBinary(t *testing.T) {
	up := newUpstream(t, byModel)
	d := startDaemon(t, writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()})), baseEnv())
	body := []byte(`{"model":"review-always-bad","messages":[{"role":"user","content":"{\"text\":\"The soup was cold.\"}"}]}`)
	post := func() (*http.Response, map[string]any) {
		req, _ := http.NewRequest("POST", d.BaseURL()+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error map[string]any `json:"error"`
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 422 || json.Unmarshal(b, &e) != nil {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return resp, e.Error
	}
	r1, e1 := post()
	calls := len(up.Requests())
	r2, e2 := post()
	id := e1["review"].(map[string]any)["id"].(string)
	if e2["review"].(map[string]any)["id"] != id || e2["message"] != e1["message"] {
		t.Fatalf("repeat answered %v", e2)
	}
	if r1.Header.Get("X-Contract-Deduplicated") != "" || r2.Header.Get("X-Contract-Deduplicated") != "true" || r2.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("headers %v / %v", r1.Header, r2.Header)
	}
	if got := len(up.Requests()); got != calls || calls != 2 {
		t.Fatalf("upstream calls %d then %d, want 2 and no more", calls, got)
	}
	reqID := r2.Header.Get("X-Request-Id")
	if !waitFor(5*time.Second, func() bool {
		for _, ev := range d.stdout.JSON() {
			if ev["request_id"] == reqID {
				return ev["outcome"] == "needs_review" && ev["deduplicated"] == true && ev["review_id"] == id
			}
		}
		return false
	}) {
		t.Fatalf("no deduplicated audit line for %s:\n%s", reqID, d.stdout)
	}
	resp, err := http.Get("http://" + d.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte("contractd_dedupe_entries 1\n")) || !bytes.Contains(b, []byte("contractd_dedupe_evictions_total 0\n")) {
		t.Fatalf("metrics:\n%s", b)
	}
}
