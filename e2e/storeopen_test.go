package e2e

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// serve listens before it opens (and migrates) the review store, which it
// does in the background: while the store is not open yet, /healthz and
// /readyz answer 200 at once (a store that cannot be opened does not make
// serve unready: the replica answers and spools), needs_review items are
// spooled (stored: true) and found there, the reviewer list answers 503
// review_store_unavailable, and once the store opens the spool moves in.
// Here another process holds the database's lock, as a replica on the
// same host migrating it would.
// serve gives the open 2 s before it listens (a usual start answers with
// the store open), then goes on without it.
// Before, serve opened the store first and did not listen for as long as
// the lock was held (at least SQLite's 10 s busy timeout): a migration
// longer than the Kubernetes kit's 30 s startup probe got the pod killed
// mid-migration at every start.
func TestServeListensWhileTheStoreOpens(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	locked := true
	release := func() {
		if locked {
			locked = false
			if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	defer release()

	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL()}))
	start := time.Now()
	d := startProcess(t, baseEnv(), "serve", "-c", cfg)
	d.awaitListening(cfg)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("serve listened %v after start, with the store's lock held", took)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if st, m := adminGet(t, d, p); st != 200 {
			t.Errorf("%s while the store opens: %d %v", p, st, m)
		}
	}
	id := needsReview(t, d, "The soup was cold while the store was opening.")
	spool := filepath.Join(dir, "review-spool.jsonl")
	if b, err := os.ReadFile(spool); err != nil || !strings.Contains(string(b), id) {
		t.Fatalf("the 422's item is not in the spool: %v", err)
	}
	if st, m := adminGet(t, d, "/admin/reviews/"+id); st != 200 || m["id"] != id {
		t.Errorf("the spooled item while the store opens: %d %v", st, m)
	}
	if st, m := adminGet(t, d, "/admin/reviews"); st != 503 || errorCode(m) != "review_store_unavailable" {
		t.Errorf("the reviewer list while the store opens: %d %v, want 503 review_store_unavailable", st, m)
	}
	if n := d.countLog(msgIs("review store open")); n != 0 {
		t.Fatalf("the store opened with its lock held (%d lines)", n)
	}
	// serve waited its 2 s for the store, then listened and said so.
	if n := d.countLog(msgIs("review store still opening; listening meanwhile (items are spooled until it opens)")); n != 1 {
		t.Errorf("'review store still opening' logged %d times, want 1", n)
	}

	release()
	if _, ok := d.logLine(40*time.Second, msgIs("review store open")); !ok {
		t.Fatalf("the store never opened after the lock was released:\n%s", d.stderr)
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
		t.Fatal("the spool was never moved into the store")
	}
	if st, m := adminGet(t, d, "/admin/reviews/"+id); st != 200 || m["status"] != "pending" {
		t.Errorf("the item after the store opened: %d %v", st, m)
	}
	if st, m := adminGet(t, d, "/admin/reviews"); st != 200 || len(m["items"].([]any)) != 1 {
		t.Errorf("the reviewer list after the store opened: %d %v", st, m)
	}
}

// errorCode is an error envelope's code ("" when m is not one).
func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}
