package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"golang.org/x/sys/unix"
)

var badSeq atomic.Int64

// badReview sends one request that ends in needs_review and returns the
// review id when the client received a 422.
func badReview(client *http.Client, d *daemon) (string, bool) {
	// Each body differs: an identical repeat would be answered from the
	// dedupe window with the first item instead of making a new one.
	body := fmt.Sprintf(`{"model":"review-always-bad","messages":[{"role":"user","content":"{\"text\":\"The soup was cold (%d).\"}"}]}`, badSeq.Add(1))
	req, _ := http.NewRequest("POST", d.BaseURL()+"/chat/completions", bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 422 {
		return "", false
	}
	return storedReviewID(b)
}

// storedReviewID is the review item's id from a 422 needs_review body,
// when the body says the item is durable ("stored": true, in the store or
// the spool); a body that is not such a 422, or store none, gives false.
func storedReviewID(body []byte) (string, bool) {
	var e struct {
		Error struct {
			Review struct {
				ID     string `json:"id"`
				Stored bool   `json:"stored"`
			} `json:"review"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || !e.Error.Review.Stored {
		return "", false
	}
	return e.Error.Review.ID, true
}

// needsReview sends text to review-always-bad, whose every answer fails
// its contract, and returns the id of the review item the 422 says is
// stored.
func needsReview(t *testing.T, d *daemon, text string) string {
	t.Helper()
	resp, body := post(t, d, reviewBody("review-always-bad", text))
	if resp.StatusCode != 422 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	id, ok := storedReviewID(body)
	if !ok {
		t.Fatalf("the 422 names no stored review item: %s", body)
	}
	return id
}

// adminGet GETs the admin listener's path; the body decoded as an object.
func adminGet(t *testing.T, d *daemon, path string) (int, map[string]any) {
	t.Helper()
	resp, b := sendAs(t, http.MethodGet, "http://"+d.Admin+path, "", "")
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// kill -9 while requests that end in 422 are in flight: after a restart,
// every id a client was told about is in the store.
func TestReviewSurvivesKill9(t *testing.T) {
	up := newUpstream(t, func(req upstreamRequest, n int) reply {
		r := byModel(req, n)
		r.Delay = 5 * time.Millisecond
		return r
	})
	dir := t.TempDir()
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL()}))
	d := startDaemon(t, cfg, baseEnv())

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var ids []string
	stop := testkit.Repeat(8, func(int, int) bool {
		if id, ok := badReview(client, d); ok {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}
		return true
	})
	if !waitFor(20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(ids) >= 40 }) {
		t.Fatal("too few 422s")
	}
	d.signal(syscall.SIGKILL) // requests are in flight on 8 clients
	<-d.done
	stop()
	mu.Lock()
	got := append([]string(nil), ids...)
	mu.Unlock()

	d2 := startDaemon(t, cfg, baseEnv())
	// serve waits up to 2 s for the store before it listens; a slower open
	// goes on in the background, and meanwhile an id that is not in the
	// spool answers 503 review_store_unavailable (asked again here), never
	// 404: a 404 is a lost item, at once.
	for _, id := range got {
		var st int
		var m map[string]any
		waitFor(30*time.Second, func() bool {
			st, m = adminGet(t, d2, "/admin/reviews/"+id)
			return st != 503 || errorCode(m) != "review_store_unavailable"
		})
		if st != 200 || m["id"] != id {
			t.Fatalf("review %s lost after kill -9: %d %v", id, st, m)
		}
	}
	// every one is in the store itself, not waiting in a spool (once the
	// store is open, Run moves the spool in before anything else)
	spool := filepath.Join(dir, "review-spool.jsonl")
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
		_, err := os.Stat(spool)
		t.Fatalf("spool left: %v", err)
	}
	st, m := adminGet(t, d2, "/admin/reviews?limit=500&status=pending")
	if st != 200 || len(m["items"].([]any)) < len(got) {
		t.Fatalf("list: %d, %d items for %d ids", st, len(m["items"].([]any)), len(got))
	}
	t.Logf("%d ids checked after kill -9", len(got))
}

// serve starts, stays ready and spools when the store cannot be opened,
// then moves the spooled items in once it can.
func TestReviewStoreUnavailableAtStart(t *testing.T) {
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	// A directory where the database file should be: sqlite cannot open it.
	blocker := filepath.Join(dir, "reviews.db")
	if err := os.Mkdir(blocker, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL()}))
	d := startDaemon(t, cfg, baseEnv())
	if st, _ := adminGet(t, d, "/readyz"); st != 200 {
		t.Fatalf("not ready: %d", st)
	}
	client := &http.Client{}
	defer client.CloseIdleConnections()
	id, ok := badReview(client, d)
	if !ok {
		t.Fatal("422 not stored (spooled)")
	}
	spool := filepath.Join(dir, "review-spool.jsonl")
	if b, err := os.ReadFile(spool); err != nil || !bytes.Contains(b, []byte(id)) {
		t.Fatalf("not in the spool: %v", err)
	}
	if _, ok := d.logLine(5*time.Second, msgIs("review store unavailable; items are spooled")); !ok {
		t.Fatal("store failure not logged")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
		t.Fatal("spool never drained")
	}
	if st, m := adminGet(t, d, "/admin/reviews/"+id); st != 200 || m["status"] != "pending" {
		t.Fatalf("%d %v", st, m)
	}
	if b := d.metrics(t); !bytes.Contains(b, []byte("contractd_review_store_errors_total 1")) || !bytes.Contains(b, []byte(`contractd_reviews_pending{`)) {
		t.Fatalf("metrics:\n%s", b)
	}
}

// SIGTERM with items still in the spool (the store never opened): serve
// exits cleanly, the items stay in the spool file, and the error names the
// spool, so an operator knows which file a later contractd must start with.
func TestReviewSpoolLeftAtShutdown(t *testing.T) {
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "reviews.db"), 0o755); err != nil { // sqlite cannot open it
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL()}))
	d := startDaemon(t, cfg, baseEnv())
	client := &http.Client{}
	defer client.CloseIdleConnections()
	id, ok := badReview(client, d)
	if !ok {
		t.Fatal("422 not stored (spooled)")
	}
	client.CloseIdleConnections()
	d.signal(syscall.SIGTERM)
	if code := d.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, d.stderr)
	}
	spool := filepath.Join(dir, "review-spool.jsonl")
	if b, err := os.ReadFile(spool); err != nil || !bytes.Contains(b, []byte(id)) {
		t.Fatalf("item not left in the spool: %v", err)
	}
	m, ok := d.logLine(time.Second, msgIs("review items remain in the spool at shutdown; a contractd started with this spool file moves them into the store"))
	if !ok || m["level"] != "ERROR" || m["spool"] != spool {
		t.Fatalf("no error naming the spool: %v\n%s", m, d.stderr)
	}
}

// The store's files become unwritable while serving (RLIMIT_FSIZE lowered
// on the running process: every write past 16 KiB fails with EFBIG):
// needs_review items go to the spool, and into the store once writes work
// again.
func TestReviewStoreUnwritableAtRuntime(t *testing.T) {
	dir := t.TempDir()
	_, d := serveBase(t, dir)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	for i := 0; i < 3; i++ { // the store grows past the limit set below
		if _, ok := badReview(client, d); !ok {
			t.Fatal("422 not stored")
		}
	}
	pid := d.cmd.Process.Pid
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 16 << 10, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 2; i++ {
		id, ok := badReview(client, d)
		if !ok {
			t.Fatal("422 not durable while the store cannot be written")
		}
		ids = append(ids, id)
	}
	spool := filepath.Join(dir, "review-spool.jsonl")
	b, err := os.ReadFile(spool)
	if err != nil {
		t.Fatalf("nothing spooled: %v", err)
	}
	for _, id := range ids {
		if !bytes.Contains(b, []byte(id)) {
			t.Fatalf("%s not in the spool", id)
		}
	}
	if st, _ := adminGet(t, d, "/readyz"); st != 200 {
		t.Fatalf("not ready while the store fails: %d", st)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &old, nil); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
		t.Fatal("spool never drained")
	}
	for _, id := range ids {
		if st, m := adminGet(t, d, "/admin/reviews/"+id); st != 200 || m["id"] != id {
			t.Fatalf("%s: %d %v", id, st, m)
		}
	}
	if d.exited() {
		t.Fatal("contractd died")
	}
}

// The binary serves the reviewer page from its embedded files on the admin
// listener, without a key and with its CSP; the API listener does not.
func TestReviewPageServedByBinary(t *testing.T) {
	_, d := serveBase(t, t.TempDir())
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	get := func(url string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for path, want := range map[string]string{"/review/": "<title>contractd", "/review/app.js": `"use strict"`, "/review/style.css": ":root"} {
		resp, body := get("http://" + d.Admin + path)
		if resp.StatusCode != 200 || !strings.Contains(body, want) ||
			!strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("%s: %d %v %.60q", path, resp.StatusCode, resp.Header, body)
		}
	}
	if resp, _ := get("http://" + d.Admin + "/review"); resp.StatusCode != 301 || resp.Header.Get("Location") != "/review/" {
		t.Fatalf("/review: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get("http://" + d.API + "/review/"); resp.StatusCode != 404 {
		t.Fatalf("API listener /review/: %d", resp.StatusCode)
	}
}
