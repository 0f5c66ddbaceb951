package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// An upgrade with work in flight, on the data an old contractd left:
// testdata/upgrade-446df2f holds what contractd 446df2f (2026-11-28, SQLite
// schema level 7: before migrations 0008 to 0010 and any later one) wrote
// with testdata/upgrade-446df2f/contractd.yaml, a webhook receiver that
// answered 503 and the store's lock held by another process at the end
// (produced by a throwaway e2e test run against that binary, then SIGTERM):
//
//	reviews-level7.sqlite (reviews.db)
//	                    A approved (note "fixed"), B rejected (note "spam"),
//	                    C pending after a rerun (two attempts), D pending;
//	                    six webhook deliveries in their backoff (tries 2):
//	                    review.created of A-D, review.resolved of A and B
//	spool.jsonl         (review-spool.jsonl) E, its 422 spooled (the store locked), left at exit
//	items.jsonl         GET /admin/reviews/{id} of A-E from the old binary
//
// The new binary started on it migrates the store, moves E in, delivers
// each pending delivery once, and serves the old items as the old binary
// did: reads, approve, export, dedupe and the rule filter. The fixture's
// times are moved to now first (the same shift for every one), so the
// deliveries are inside their 24 h and the dedupe windows (1 h) open.
func TestUpgradeFromOldSQLiteStoreAndSpool(t *testing.T) {
	t.Parallel()
	const secret = "whsec-upgrade-fixture"
	fixture := filepath.Join("testdata", "upgrade-446df2f")
	var old []map[string]any // A..E as the old binary served them
	for _, line := range scanLines(readFile(t, filepath.Join(fixture, "items.jsonl"))) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		old = append(old, m)
	}
	if len(old) != 5 {
		t.Fatalf("fixture: %d items, want 5", len(old))
	}
	ids := make([]string, 5)
	for i, m := range old {
		ids[i] = m["id"].(string)
	}
	a, b, c, d, e := ids[0], ids[1], ids[2], ids[3], ids[4]

	// The shift: E, the last item, was created just before the old
	// binary stopped.
	last, err := time.Parse(time.RFC3339Nano, old[4]["created_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	shift := time.Since(last)
	dir := t.TempDir()
	// Under the names serve uses (the repository ignores those).
	for from, to := range map[string]string{"reviews-level7.sqlite": "reviews.db", "spool.jsonl": "review-spool.jsonl"} {
		writeFile(t, filepath.Join(dir, to), readFile(t, filepath.Join(fixture, from)))
	}
	shiftSQLite(t, filepath.Join(dir, "reviews.db"), shift)
	shiftSpool(t, filepath.Join(dir, "review-spool.jsonl"), shift)

	hook := testkit.NewWebhookReceiver(t, secret)

	up := newUpstream(t, byModel)
	env := baseEnv()
	env["CONTRACTD_WEBHOOK_SECRET"] = secret
	cfg := writeConfig(t, dir, strings.NewReplacer("@UPSTREAM@", up.URL(), "@HOOK@", hook.URL).
		Replace(readFile(t, filepath.Join(fixture, "contractd.yaml"))))
	dm := startDaemon(t, cfg, env)

	// The spool moved in, and every item reads as the old binary served
	// it: every field it had, the same (times shifted alike).
	spool := filepath.Join(dir, "review-spool.jsonl")
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
		t.Fatalf("the old binary's spool was not moved into the store:\n%s", dm.stderr)
	}
	for i, want := range old {
		st, got := adminGet(t, dm, "/admin/reviews/"+ids[i])
		if st != 200 {
			t.Fatalf("GET /admin/reviews/%s: %d %v", ids[i], st, got)
		}
		for k, v := range want {
			if k == "created_at" || k == "resolved_at" {
				if !sameShifted(v, got[k], shift) {
					t.Errorf("item %d %s: %s %v, want %v moved by %v", i, ids[i], k, got[k], v, shift)
				}
				continue
			}
			if !reflect.DeepEqual(got[k], v) {
				t.Errorf("item %d %s: %s = %v, the old binary served %v", i, ids[i], k, got[k], v)
			}
		}
	}

	// The client reads its approved item.
	resp, body := getAs(t, dm, clientKey, "/reviews/"+a)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"status":"approved"`)) || !bytes.Contains(body, []byte(`"summary":"Cold soup."`)) {
		t.Errorf("client GET of the old approved item: %d %s", resp.StatusCode, body)
	}

	// Every delivery the old binary left pending, and E's, arrive once.
	events := []string{"review.created " + a, "review.created " + b, "review.created " + c, "review.created " + d,
		"review.created " + e, "review.resolved " + a, "review.resolved " + b}
	if !waitFor(20*time.Second, func() bool {
		for _, k := range events {
			if hook.Delivered(k) == 0 {
				return false
			}
		}
		return true
	}) {
		_, byEvent := hook.Accepted()
		t.Fatalf("deliveries after the upgrade: %v, want each of %v", byEvent, events)
	}

	// Reviewers go on: approve the rerun item and the spooled one, reject
	// D; the old resolved ones answer 409.
	for _, x := range []struct {
		id, action, body string
		want             int
	}{
		{c, "approve", approveBody, 200},
		{e, "approve", approveBody, 200},
		{d, "reject", `{"reviewer":"cy"}`, 200},
		{a, "approve", approveBody, 409},
		{b, "reject", `{"reviewer":"cy"}`, 409},
	} {
		if st, m := postAdmin(t, dm, "/admin/reviews/"+x.id+"/"+x.action, x.body); st != x.want {
			t.Errorf("%s %s: %d %v, want %d", x.action, x.id, st, m, x.want)
		}
	}
	if !waitFor(10*time.Second, func() bool {
		return hook.Delivered("review.resolved "+c) > 0 && hook.Delivered("review.resolved "+d) > 0 && hook.Delivered("review.resolved "+e) > 0
	}) {
		t.Errorf("the new resolutions' deliveries did not arrive")
	}

	// Export, the rule filter and the list, on old and new rows alike.
	st, exp := adminText(t, dm, "/admin/reviews/export?status=approved")
	var exported []string
	for _, line := range scanLines(exp) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			exported = append(exported, fmt.Sprint(m["id"]))
		}
	}
	if st != 200 || fmt.Sprint(exported) != fmt.Sprint([]string{e, c, a}) {
		t.Errorf("export of approved items: %d %v, want %v (by resolution, newest first)", st, exported, []string{e, c, a})
	}
	for q, want := range map[string][]string{
		"rule=not_json":                   {e, d, c, b, a},
		"rule=not_json&status=approved":   {e, c, a},
		"rule=not_json&status=rejected":   {d, b},
		"status=pending":                  nil,
		"route=review-always-bad&limit=2": {e, d},
	} {
		st, m := adminGet(t, dm, "/admin/reviews?"+q)
		var got []string
		items, _ := m["items"].([]any)
		for _, it := range items {
			got = append(got, fmt.Sprint(it.(map[string]any)["id"]))
		}
		if st != 200 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("GET /admin/reviews?%s: %d %v, want %v", q, st, got, want)
		}
	}

	// Dedupe: an identical repeat of an old request, in the store's
	// window or the spool's, gets the item the old binary answered.
	for text, want := range map[string]string{"Upgrade D.": d, "Upgrade E.": e, "Upgrade A.": a} {
		resp, body := post(t, dm, reviewBody("review-always-bad", text))
		if got, _ := storedReviewID(body); resp.StatusCode != 422 || got != want {
			t.Errorf("repeat of %q: %d %s, want the 422 of %s", text, resp.StatusCode, got, want)
		}
	}

	time.Sleep(1500 * time.Millisecond) // a second post of any delivery would show now
	byDelivery, byEvent := hook.Accepted()
	for k, n := range byDelivery {
		if n != 1 {
			t.Errorf("delivery %q posted %d times, want once", k, n)
		}
	}
	for k, n := range byEvent {
		if n != 1 {
			t.Errorf("%s delivered %d times, want once", k, n)
		}
	}
	if n := hook.Unsigned(); n != 0 {
		t.Errorf("%d deliveries without a valid signature or delivery id", n)
	}
}

// shiftSQLite moves every time in a store at schema level 7 by d.
func shiftSQLite(t *testing.T, path string, d time.Duration) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns := int64(d)
	for _, q := range []string{
		`UPDATE reviews SET created_ns = created_ns + ?1, resolved_ns = resolved_ns + ?1, dedupe_until_ns = dedupe_until_ns + ?1`,
		`UPDATE review_rules SET created_ns = created_ns + ?1`,
		`UPDATE webhook_outbox SET created_ns = created_ns + ?1, next_ns = next_ns + ?1`,
	} {
		if _, err := db.ExecContext(context.Background(), q, ns); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// shiftSpool moves each spooled item's created_at and dedupe window end
// by d.
func shiftSpool(t *testing.T, path string, d time.Duration) {
	t.Helper()
	var out bytes.Buffer
	sc := bufio.NewScanner(strings.NewReader(readFile(t, path)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		m["created_at"] = shifted(t, m["created_at"], d)
		if dd, ok := m["dedupe"].(map[string]any); ok {
			dd["until"] = shifted(t, dd["until"], d)
		}
		b, _ := json.Marshal(m)
		out.Write(append(b, '\n'))
	}
	writeFile(t, path, out.String())
}

func shifted(t *testing.T, v any, d time.Duration) string {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v))
	if err != nil {
		t.Fatal(err)
	}
	return ts.Add(d).UTC().Format(time.RFC3339Nano)
}

// sameShifted reports whether got is was moved by d (both RFC 3339, or
// both null).
func sameShifted(was, got any, d time.Duration) bool {
	if was == nil || got == nil {
		return was == nil && got == nil
	}
	w, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(was))
	g, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(got))
	return err1 == nil && err2 == nil && w.Add(d).Equal(g)
}

// getAs sends GET /v1{path} with key.
func getAs(t *testing.T, d *daemon, key, path string) (*http.Response, []byte) {
	t.Helper()
	return sendAs(t, http.MethodGet, d.BaseURL()+path, key, "")
}

// postAdmin POSTs body to the admin listener's path.
func postAdmin(t *testing.T, d *daemon, path, body string) (int, map[string]any) {
	t.Helper()
	resp, b := sendAs(t, http.MethodPost, "http://"+d.Admin+path, "", body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// adminText GETs the admin listener's path and returns the body as text.
func adminText(t *testing.T, d *daemon, path string) (int, string) {
	t.Helper()
	resp, b := sendAs(t, http.MethodGet, "http://"+d.Admin+path, "", "")
	return resp.StatusCode, string(b)
}
