package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// The real binary answers an identical repeat of a needs_review request
// from the dedupe window: same review, no upstream call, an audit line
// marked deduplicated, and the cache's size on /metrics.
func TestDedupeRealBinary(t *testing.T) {
	up, d := serveBase(t, t.TempDir())
	post := func() (*http.Response, map[string]any) { return postDedupe(t, d) }
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
	if b := d.metrics(t); !bytes.Contains(b, []byte("contractd_dedupe_entries 1\n")) || !bytes.Contains(b, []byte("contractd_dedupe_evictions_total 0\n")) {
		t.Fatalf("metrics:\n%s", b)
	}
}

const dedupeBody = `{"model":"review-always-bad","messages":[{"role":"user","content":"{\"text\":\"The soup was cold.\"}"}]}`

// postDedupe sends dedupeBody and returns the 422's headers and error object.
func postDedupe(t *testing.T, d *daemon) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", d.BaseURL()+"/chat/completions", bytes.NewReader([]byte(dedupeBody)))
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

// Two processes sharing one review store are two replicas: a repeat on the
// other one, once it has read the store (every half second), gets the same
// 422 without an upstream call, and so does a repeat after both were
// killed with -9 and one restarted (the window is in the store, not in a
// process).
func TestDedupeAcrossProcesses(t *testing.T) {
	up := newUpstream(t, byModel)
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()}))
	a := startDaemon(t, cfg, baseEnv())
	b := startDaemon(t, cfg, baseEnv())
	_, e1 := postDedupe(t, a)
	id := e1["review"].(map[string]any)["id"].(string)
	check := func(d *daemon, who string) {
		t.Helper()
		r, e := postDedupe(t, d)
		if e["review"].(map[string]any)["id"] != id || e["message"] != e1["message"] || r.Header.Get("X-Contract-Deduplicated") != "true" {
			t.Fatalf("%s answered %v %v", who, r.Header, e)
		}
		if n := len(up.Requests()); n != 2 {
			t.Fatalf("%s: upstream calls %d, want 2 (one run on the first process)", who, n)
		}
	}
	time.Sleep(dedupeSyncWait)
	check(b, "the second process")
	a.signal(syscall.SIGKILL)
	b.signal(syscall.SIGKILL)
	<-a.done
	<-b.done
	c := startDaemon(t, cfg, baseEnv())
	time.Sleep(dedupeSyncWait)
	check(c, "a process started after kill -9")
}

// dedupeSyncWait is long enough for a replica's dedupe sync (every 500 ms)
// to have read the store, with room for a loaded machine.
const dedupeSyncWait = 2 * time.Second
