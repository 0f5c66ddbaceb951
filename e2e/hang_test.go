package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// Dependencies that hang rather than refuse: the server's processes are
// stopped (SIGSTOP), so the kernel still accepts connections and takes the
// bytes sent, and nothing ever answers. Each test continues what it stopped
// (t.Cleanup), whatever its outcome.

// storeHangBound is how long a call that touches a hung PostgreSQL may
// take: the 5 s the store is given per write or read (its deadline, or a
// new connection's connect_timeout) and slack for a loaded machine.
const storeHangBound = 8 * time.Second

// breakerBound is how long a 422 may take once the store's breaker is open
// (three writes in a row failed): a spool append and its fsync, no wait on
// the store, with slack for a loaded machine.
const breakerBound = 2 * time.Second

const breakerOpened = "review store failing; needs_review items are spooled without waiting for it until the spool moves in"

// timedCall sends one request and returns its status, body and duration
// (status 0: a transport error, in the body).
func timedCall(c *http.Client, method, url, key, body string) (int, []byte, time.Duration) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), time.Since(start)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, time.Since(start)
}

// PostgreSQL hung under two replicas: the health checks answer at once,
// 422s are spooled (stored: true) after the store's bound, each within it
// while the spool's drain waits on the store, then, three writes in a row
// having failed (the store's breaker open, logged once), at once; their
// clients can read them from the spool meanwhile; the reviewer API answers
// 503 review_store_unavailable within the bound, the export too. Once the
// server continues, the spool moves in by itself, the breaker closes and
// the next item is stored, a waiter on one replica is released by an
// approval on the other (LISTEN/NOTIFY listens again), and after kill -9
// and a restart every id a client was told about is in the store.
//
// Before: the 422s of a hang were answered after 5, 10 and 15 s, each one
// spooled behind the spool's drain, which held the spool's lock while it
// waited on the hung store; and a spooled item's poll answered 503 until
// the store came back; and every 422 waited its 5 s for as long as the
// hang lasted.
func TestPostgresHung(t *testing.T) {
	srv := testkit.StartPostgres(t)
	c := startCluster(t, 2, clusterOpts{upstream: newUpstream(t, byModel).URL(), dsn: srv.DSN})
	r1, r2 := c.replica(0), c.replica(1)
	waiting := c.newPending(t, 0)

	hung := srv.Freeze(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if st, b, el := timedCall(c.client, "GET", "http://"+r1.Admin+p, "", ""); st != 200 || el > time.Second {
			t.Fatalf("%s with the store hung: %d after %v: %s", p, st, el, b)
		}
	}
	// One 422, then two at once while the spool's drain waits on the
	// store: each spooled within the bound, none behind the drain.
	var mu sync.Mutex
	var ids []string
	for _, n := range []int{1, 2} {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				start := time.Now()
				id, ok := badReview(c.client, r1)
				el := time.Since(start)
				if !ok || el > storeHangBound {
					t.Errorf("422 with the store hung: stored %v after %v (want within %v)", ok, el.Round(time.Millisecond), storeHangBound)
					return
				}
				t.Logf("422 spooled after %v", el.Round(time.Millisecond))
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if t.Failed() {
		return
	}
	// Three writes in a row failed: the breaker is open, and the next
	// 422s are spooled at once, without waiting for the hung store (each
	// waited its 5 s for as long as the hang lasted).
	for range 3 {
		start := time.Now()
		id, ok := badReview(c.client, r1)
		if el := time.Since(start); !ok || el > breakerBound {
			t.Fatalf("422 with the store's breaker open: stored %v after %v (want within %v)", ok, el.Round(time.Millisecond), breakerBound)
		}
		ids = append(ids, id)
	}
	if _, ok := r1.logLine(5*time.Second, msgIs(breakerOpened)); !ok {
		t.Errorf("the breaker's opening not logged:\n%s", r1.stderr)
	} else if n := r1.countLog(msgIs(breakerOpened)); n != 1 {
		t.Errorf("%d breaker lines, want 1:\n%s", n, r1.stderr)
	}
	spool := filepath.Join(filepath.Dir(c.cfgs[0]), "review-spool.jsonl")
	if _, err := os.Stat(spool); err != nil {
		t.Fatalf("no spool while the store hangs: %v", err)
	}
	// The client the 422 told to poll finds its item.
	st, b, el := timedCall(c.client, "GET", r1.BaseURL()+"/reviews/"+ids[0], clientKey, "")
	var item map[string]any
	_ = json.Unmarshal(b, &item)
	if st != 200 || item["id"] != ids[0] || item["status"] != "pending" || el > storeHangBound {
		t.Fatalf("poll of a spooled item with the store hung: %d after %v: %s", st, el, b)
	}
	st, b, el = timedCall(c.client, "GET", "http://"+r1.Admin+"/admin/reviews", "", "")
	if st != 503 || !strings.Contains(string(b), `"review_store_unavailable"`) || el > storeHangBound {
		t.Fatalf("admin list with the store hung: %d after %v: %s", st, el, b)
	}
	// An export the store cannot serve is not an empty one (it was a 200
	// with no lines).
	st, b, el = timedCall(c.client, "GET", "http://"+r1.Admin+"/admin/reviews/export?status=approved", "", "")
	if st != 503 || !strings.Contains(string(b), `"review_store_unavailable"`) || el > storeHangBound {
		t.Fatalf("export with the store hung: %d after %v: %s", st, el, b)
	}

	hung.Thaw()
	thawed := time.Now()
	if !waitFor(20*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
		t.Fatalf("the spool did not move in after the store continued:\n%s", r1.stderr)
	}
	t.Logf("spool moved in %v after the store continued", time.Since(thawed).Round(time.Millisecond))
	// The drain closed the breaker: the next item is stored, not spooled.
	if _, ok := r1.logLine(5*time.Second, msgIs("review store takes items again; needs_review items are stored, not spooled")); !ok {
		t.Fatalf("the store's breaker did not close after the spool moved in:\n%s", r1.stderr)
	}
	id, ok := badReview(c.client, r1)
	if _, err := os.Stat(spool); !ok || !os.IsNotExist(err) {
		t.Fatalf("422 after the store continued: stored %v, spool %v (want stored, no spool)", ok, err)
	}
	ids = append(ids, id)

	// A waiter on replica 2 is released by an approval on replica 1.
	released := make(chan int, 1)
	go func() {
		st, _, _ := timedCall(c.client, "GET", r2.BaseURL()+"/reviews/"+waiting+"?wait=20s", clientKey, "")
		released <- st
	}()
	time.Sleep(500 * time.Millisecond)
	if st, m := c.admin(t, 0, "POST", "/admin/reviews/"+waiting+"/approve", approveBody); st != 200 {
		t.Fatalf("approve after the store continued: %d %v", st, m)
	}
	approved := time.Now()
	select {
	case st := <-released:
		if st != 200 {
			t.Fatalf("waiter on replica 2: %d", st)
		}
		t.Logf("waiter on replica 2 released %v after the approval on replica 1", time.Since(approved).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("waiter on replica 2 not released by an approval on replica 1 after the hang: notifications lost")
	}

	// kill -9 and a restart: every id a client was told about is there.
	r1.signal(syscall.SIGKILL)
	<-r1.done
	d := startDaemon(t, c.cfgs[0], c.env)
	c.awaitReady(t, d)
	c.set(0, d)
	for _, id := range ids {
		if st, m := c.admin(t, 0, "GET", "/admin/reviews/"+id, ""); st != 200 || m["id"] != id {
			t.Fatalf("review %s after the hang, kill -9 and a restart: %d %v", id, st, m)
		}
	}
	if strings.Contains(r1.stderr.String(), srv.DSN) {
		t.Error("the DSN reached the log")
	}
}

// A webhook receiver that accepts and never answers: the 422 is not
// delayed, the post times out after 10 s and is logged (once) and counted,
// and once the receiver answers the delivery goes out by itself. Before,
// the failure was counted and never logged.
func TestWebhookReceiverHung(t *testing.T) {
	var answer atomic.Bool
	var delivered atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !answer.Load() {
			select { // hung until contractd gives up the post
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		delivered.Add(1)
		w.WriteHeader(204)
	}))
	t.Cleanup(hs.Close)
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: newUpstream(t, byModel).URL()})+
		"\nreview:\n  webhook:\n    url: "+hs.URL+"/hook/tok-SECRET-9\n    secret_env: CONTRACTD_WEBHOOK_SECRET\n")
	env := baseEnv()
	env["CONTRACTD_WEBHOOK_SECRET"] = "whsec-test-fake"
	d := startDaemon(t, cfg, env)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	start := time.Now()
	if _, ok := badReview(client, d); !ok {
		t.Fatal("no stored 422")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("the 422 waited %v for a hung webhook receiver", el)
	}
	line, ok := d.logLine(15*time.Second, msgIs("webhook delivery failed; retried with backoff"))
	if !ok {
		t.Fatalf("a hung receiver's failed post was not logged:\n%s", d.stderr)
	}
	if line["error"] != "no answer within 10s" {
		t.Errorf("failure line: %v", line)
	}
	if !strings.Contains(string(d.metrics(t)), `contractd_webhook_deliveries_total{result="failure"} 1`) {
		t.Error("the failed post is not counted")
	}
	answer.Store(true)
	if !waitFor(10*time.Second, func() bool { return delivered.Load() == 1 }) {
		t.Fatalf("not delivered once the receiver answered:\n%s", d.stderr)
	}
	if _, ok := d.logLine(5*time.Second, msgIs("webhook receiver took a delivery again")); !ok {
		t.Errorf("recovery not logged:\n%s", d.stderr)
	}
	if n := d.countLog(msgIs("webhook delivery failed; retried with backoff")); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
	if strings.Contains(d.stderr.String(), "SECRET") {
		t.Error("the webhook URL reached the log")
	}
}

// PostgreSQL already hung when serve starts: serve gives the store's first
// open its 2 s, listens, is ready and spools; once the server continues,
// the store opens by itself and the spool moves in.
func TestPostgresHungAtStart(t *testing.T) {
	srv := testkit.StartPostgres(t)
	hung := srv.Freeze(t)
	dir := t.TempDir()
	env := baseEnv()
	env["CONTRACTD_REVIEW_DSN"] = srv.DSN
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: newUpstream(t, byModel).URL()})+"\nreview:\n  store: postgres\n  dsn_env: CONTRACTD_REVIEW_DSN\n")
	start := time.Now()
	d := startDaemon(t, cfg, env)
	listening := time.Since(start)
	t.Logf("listening %v after start with the store hung", listening.Round(time.Millisecond))
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	if st, b, el := timedCall(client, "GET", "http://"+d.Admin+"/readyz", "", ""); st != 200 || el > time.Second {
		t.Fatalf("/readyz with the store hung at start: %d after %v: %s", st, el, b)
	}
	begin := time.Now()
	id, ok := badReview(client, d)
	if el := time.Since(begin); !ok || el > storeHangBound {
		t.Fatalf("422 with the store hung at start: stored %v after %v", ok, el)
	}
	spool := filepath.Join(dir, "review-spool.jsonl")
	if _, err := os.Stat(spool); err != nil {
		t.Fatalf("not spooled: %v", err)
	}
	hung.Thaw()
	if !waitFor(30*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
		t.Fatalf("the spool did not move in after the store continued:\n%s", d.stderr)
	}
	if _, ok := d.logLine(5*time.Second, msgIs("review store open")); !ok {
		t.Fatalf("the store never opened:\n%s", d.stderr)
	}
	if st, m := adminGet(t, d, "/admin/reviews/"+id); st != 200 || m["id"] != id {
		t.Fatalf("the spooled item after the store opened: %d %v", st, m)
	}
}

// Redis hung (the rate limiter's store): each request waits at most the
// limiter's timeout (100 ms) and passes (fail open, as with Redis down),
// three in a row open the limit for a second without asking, the failure
// is logged once and counted; once Redis continues, the shared limit
// applies again by itself.
func TestRedisHung(t *testing.T) {
	rs := testkit.StartRedis(t, 0)
	cfg := renderConfig(cfgOpts{upstream: newUpstream(t, byModel).URL(),
		server: "  rate_limit: {requests_per_second: 0.5, burst: 2, store: redis, redis_url_env: RL_REDIS_URL}\n"})
	env := baseEnv()
	env["RL_REDIS_URL"] = rs.URL
	d := startDaemon(t, writeConfig(t, t.TempDir(), cfg), env)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	body := reviewBody("review-sentiment", "Fast delivery and great food.")
	send := func() (int, time.Duration) {
		st, _, el := timedCall(client, "POST", d.BaseURL()+"/chat/completions", clientKey, body)
		return st, el
	}
	for range 2 {
		if st, _ := send(); st != 200 {
			t.Fatalf("within the burst: %d", st)
		}
	}
	if st, _ := send(); st != 429 {
		t.Fatalf("over the burst: %d", st)
	}
	hung := rs.Freeze(t)
	for i := range 8 {
		st, el := send()
		if st != 200 || el > time.Second {
			t.Fatalf("request %d with Redis hung: %d after %v, want 200 (fail open) within the limiter's timeout", i+1, st, el)
		}
	}
	if _, ok := d.logLine(5*time.Second, msgIs("rate limit store unavailable; requests pass unlimited")); !ok {
		t.Fatalf("not logged:\n%s", d.stderr)
	}
	if n := d.countLog(msgIs("rate limit store unavailable; requests pass unlimited")); n != 1 {
		t.Errorf("%d failure lines, want 1", n)
	}
	if v := storeErrors(t, d); v < 1 {
		t.Errorf("contractd_rate_limit_store_errors_total %v", v)
	}
	hung.Thaw()
	// The limit applies again: the bucket is spent, so within a few
	// requests one is refused.
	if !waitFor(10*time.Second, func() bool { st, _ := send(); return st == 429 }) {
		t.Fatalf("the limit never applied again after Redis continued:\n%s", d.stderr)
	}
	if _, ok := d.logLine(5*time.Second, msgIs("rate limit store reachable again")); !ok {
		t.Errorf("recovery not logged:\n%s", d.stderr)
	}
}
