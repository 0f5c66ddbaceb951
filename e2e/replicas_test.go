package e2e

import (
	"context"
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
	"github.com/jackc/pgx/v5"
)

// Several replicas behave as one: three real contractd
// processes on one PostgreSQL (review.store: postgres) behind a test load
// balancer that spreads requests round-robin over the replicas in rotation.

// cluster is the replicas and the balancer in front of them.
type cluster struct {
	t      testing.TB
	env    map[string]string
	cfgs   []string
	client *http.Client

	mu       sync.Mutex
	replicas []*daemon // nil: out of rotation
	next     atomic.Uint64
}

// pick returns the next replica in rotation (round-robin) and its index.
func (c *cluster) pick() (*daemon, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range len(c.replicas) {
		i := int(c.next.Add(1)-1) % len(c.replicas)
		if d := c.replicas[i]; d != nil {
			return d, i
		}
	}
	return nil, -1
}

func (c *cluster) replica(i int) *daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas[i]
}

func (c *cluster) set(i int, d *daemon) {
	c.mu.Lock()
	c.replicas[i] = d
	c.mu.Unlock()
}

// webhookSecret signs a cluster's webhook deliveries.
const webhookSecret = "whsec-test-fake"

// clusterOpts configures startCluster.
type clusterOpts struct {
	upstream  string
	hook      string   // webhook URL ("" for none)
	env       []string // extra KEY=VALUE for every replica
	rateLimit string   // server.rate_limit as a YAML flow map ("" for none)
	dsn       string   // the PostgreSQL ("": the shared one, a fresh schema)
}

// startCluster writes one config per replica (each its own directory, so
// its own spool file) and starts them all at the same moment on a fresh
// database schema: the migrations must cope with replicas starting together.
func startCluster(t testing.TB, n int, o clusterOpts) *cluster {
	t.Helper()
	dsn := o.dsn
	if dsn == "" {
		dsn = testkit.PostgresDSN(t)
	}
	env := baseEnv()
	for _, kv := range o.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	env["CONTRACTD_REVIEW_DSN"] = dsn
	env["CONTRACTD_WEBHOOK_SECRET"] = webhookSecret
	review := "\nreview:\n  store: postgres\n  dsn_env: CONTRACTD_REVIEW_DSN\n"
	if o.hook != "" {
		review += "  webhook:\n    url: " + o.hook + "\n    secret_env: CONTRACTD_WEBHOOK_SECRET\n"
	}
	text := renderConfig(cfgOpts{upstream: o.upstream}) + review
	if o.rateLimit != "" {
		text = strings.Replace(text, "  api_keys_env: CONTRACTD_API_KEYS\n",
			"  api_keys_env: CONTRACTD_API_KEYS\n  rate_limit: "+o.rateLimit+"\n", 1)
	}
	c := &cluster{t: t, env: env, replicas: make([]*daemon, n),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	t.Cleanup(c.client.CloseIdleConnections)
	for range n {
		c.cfgs = append(c.cfgs, writeConfig(t, t.TempDir(), text))
	}
	ds := make([]*daemon, n)
	for i := range n {
		ds[i] = startProcess(t, env, "serve", "-c", c.cfgs[i])
	}
	for i, d := range ds {
		d.awaitListening(c.cfgs[i])
		c.awaitReady(t, d)
		c.replicas[i] = d
	}
	return c
}

// awaitReady waits for /readyz 200 on the replica's admin listener.
func (c *cluster) awaitReady(t testing.TB, d *daemon) {
	t.Helper()
	if !waitFor(15*time.Second, func() bool {
		resp, err := http.Get("http://" + d.Admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("replica not ready:\n%s", d.stderr)
	}
}

var replicaSeq atomic.Int64

// outcome is one request through the balancer.
type outcome struct {
	replica int
	bad     bool   // sent to the needs_review route
	status  int    // 0: transport error
	id      string // review id of a stored 422
	err     string
}

// ok reports whether the request got the answer its route gives: 200 for
// the valid route, a stored 422 for the needs_review route.
func (o outcome) ok() bool {
	if o.bad {
		return o.status == 422 && o.id != ""
	}
	return o.status == 200
}

// do sends one chat completion through the balancer: to the needs_review
// route when bad, else to the valid one.
func (c *cluster) do(bad bool) outcome {
	d, i := c.pick()
	if d == nil {
		return outcome{replica: -1, bad: bad, err: "no replica in rotation"}
	}
	model := "review-sentiment"
	if bad {
		model = "review-always-bad"
	}
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"{\"text\":\"Replica load %d.\"}"}]}`, model, replicaSeq.Add(1))
	req, _ := http.NewRequest("POST", d.BaseURL()+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Content-Type", "application/json")
	o := outcome{replica: i, bad: bad}
	resp, err := c.client.Do(req)
	if err != nil {
		o.err = err.Error()
		return o
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		o.err = err.Error()
		return o
	}
	o.status = resp.StatusCode
	if resp.StatusCode == 422 {
		if id, ok := storedReviewID(b); ok {
			o.id = id
		}
	}
	if !o.ok() {
		o.err = string(b)
	}
	return o
}

// load runs workers sending requests (every third one to the needs_review
// route) until the stop it returns is called, which returns every outcome.
func (c *cluster) load(workers int) (stop func() []outcome) {
	var mu sync.Mutex
	var all []outcome
	end := testkit.Repeat(workers, func(w, n int) bool {
		o := c.do((n+w)%3 == 0)
		mu.Lock()
		all = append(all, o)
		mu.Unlock()
		return true
	})
	return func() []outcome {
		end()
		mu.Lock()
		defer mu.Unlock()
		return all
	}
}

func (c *cluster) admin(t testing.TB, i int, method, path, body string) (int, map[string]any) {
	t.Helper()
	d := c.replica(i)
	req, _ := http.NewRequest(method, "http://"+d.Admin+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s on replica %d: %v", method, path, i+1, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// newPending makes one needs_review item through replica i.
func (c *cluster) newPending(t testing.TB, i int) string {
	t.Helper()
	id, ok := badReview(c.client, c.replica(i))
	if !ok {
		t.Fatalf("replica %d: no stored 422", i+1)
	}
	return id
}

const approveBody = `{"output":{"sentiment":"negative","summary":"Cold soup."},"reviewer":"ann"}`

func TestReplicas(t *testing.T) {
	up := newUpstream(t, func(req upstreamRequest, n int) reply {
		r := byModel(req, n)
		r.Delay = 20 * time.Millisecond // requests are in flight when a replica stops
		return r
	})
	hooks := testkit.NewWebhookReceiver(t, webhookSecret)
	c := startCluster(t, 3, clusterOpts{upstream: up.URL(), hook: hooks.URL + "/hook"})

	t.Run("round robin over one shared store", func(t *testing.T) {
		per := map[int]int{}
		var ids []string
		for n := range 30 {
			o := c.do(n%2 == 0)
			if !o.ok() {
				t.Fatalf("request %d on replica %d: %d %s", n, o.replica+1, o.status, o.err)
			}
			per[o.replica]++
			if o.id != "" {
				ids = append(ids, o.id)
			}
		}
		if per[0] != 10 || per[1] != 10 || per[2] != 10 {
			t.Fatalf("requests per replica %v, want 10 each", per)
		}
		// Every item is visible through every replica, whichever stored it,
		// to the admin and to the client key that made it.
		for _, id := range ids {
			for i := range 3 {
				if st, m := c.admin(t, i, "GET", "/admin/reviews/"+id, ""); st != 200 || m["status"] != "pending" {
					t.Fatalf("replica %d: %s: %d %v", i+1, id, st, m)
				}
				req, _ := http.NewRequest("GET", c.replica(i).BaseURL()+"/reviews/"+id, nil)
				req.Header.Set("Authorization", "Bearer "+clientKey)
				resp, err := c.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("client GET %s on replica %d: %d", id, i+1, resp.StatusCode)
				}
			}
		}
		// The webhook outbox is shared too: each event is sent once, by
		// one of the replicas.
		if !waitFor(15*time.Second, func() bool {
			for _, id := range ids {
				if hooks.Delivered("review.created "+id) == 0 {
					return false
				}
			}
			return true
		}) {
			t.Fatal("review.created deliveries missing")
		}
		time.Sleep(1500 * time.Millisecond) // every replica polls the outbox each second
		for _, id := range ids {
			if n := hooks.Delivered("review.created " + id); n != 1 {
				t.Fatalf("review.created %s delivered %d times", id, n)
			}
		}
		if n := hooks.Unsigned(); n != 0 {
			t.Fatalf("%d deliveries without a valid signature or delivery id", n)
		}
	})

	t.Run("an identical repeat on another replica gets the same 422 (dedupe window in the store)", func(t *testing.T) {
		body := `{"model":"review-always-bad","messages":[{"role":"user","content":"{\"text\":\"Dedupe across replicas.\"}"}]}`
		send := func(i int) (*http.Response, map[string]any) {
			req, _ := http.NewRequest("POST", c.replica(i).BaseURL()+"/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			return resp, m
		}
		reviewID := func(m map[string]any) any {
			e, _ := m["error"].(map[string]any)
			r, _ := e["review"].(map[string]any)
			return r["id"]
		}
		r1, m1 := send(0)
		hits := up.Hits()
		time.Sleep(dedupeSyncWait) // replica 2 reads the store's new windows every 500 ms
		r2, m2 := send(1)
		if r1.StatusCode != 422 || r2.StatusCode != 422 || reviewID(m1) == nil || reviewID(m1) != reviewID(m2) {
			t.Fatalf("first %d %v, repeat %d %v", r1.StatusCode, reviewID(m1), r2.StatusCode, reviewID(m2))
		}
		if r2.Header.Get("X-Contract-Deduplicated") != "true" || up.Hits() != hits {
			t.Fatalf("repeat on replica 2: deduplicated %q, %d upstream calls", r2.Header.Get("X-Contract-Deduplicated"), up.Hits()-hits)
		}
	})

	t.Run("concurrent approvals through all three: exactly one 200", func(t *testing.T) {
		for round := range 3 {
			id := c.newPending(t, round)
			const each = 5
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			errCodes := map[string]int{}
			start := make(chan struct{})
			for i := range 3 {
				for range each {
					wg.Go(func() {
						<-start
						st, m := c.admin(t, i, "POST", "/admin/reviews/"+id+"/approve", approveBody)
						mu.Lock()
						defer mu.Unlock()
						codes[st]++
						if e, ok := m["error"].(map[string]any); ok {
							errCodes[fmt.Sprint(e["code"])]++
						}
					})
				}
			}
			close(start)
			wg.Wait()
			if codes[200] != 1 || codes[409] != 3*each-1 || errCodes["review_already_resolved"] != 3*each-1 {
				t.Fatalf("round %d: statuses %v, error codes %v", round, codes, errCodes)
			}
			for i := range 3 {
				if st, m := c.admin(t, i, "GET", "/admin/reviews/"+id, ""); st != 200 || m["status"] != "approved" {
					t.Fatalf("replica %d after: %d %v", i+1, st, m["status"])
				}
			}
			if !waitFor(10*time.Second, func() bool { return hooks.Delivered("review.resolved "+id) >= 1 }) {
				t.Fatalf("no review.resolved delivery for %s", id)
			}
		}
	})

	t.Run("a waiter on replica 1 is released by an approval on replica 3", func(t *testing.T) {
		id := c.newPending(t, 0)
		type res struct {
			status int
			body   map[string]any
			at     time.Time
		}
		done := make(chan res, 1)
		began := time.Now()
		go func() {
			req, _ := http.NewRequest("GET", c.replica(0).BaseURL()+"/reviews/"+id+"?wait=30s", nil)
			req.Header.Set("Authorization", "Bearer "+clientKey)
			resp, err := c.client.Do(req)
			if err != nil {
				done <- res{}
				return
			}
			defer resp.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			done <- res{resp.StatusCode, m, time.Now()}
		}()
		time.Sleep(500 * time.Millisecond) // the waiter is parked on replica 1
		select {
		case r := <-done:
			t.Fatalf("waiter returned before any approval: %d %v", r.status, r.body)
		default:
		}
		sent := time.Now()
		st, m := c.admin(t, 2, "POST", "/admin/reviews/"+id+"/approve", approveBody)
		approved := time.Now()
		if st != 200 {
			t.Fatalf("approve on replica 3: %d %v", st, m)
		}
		select {
		case r := <-done:
			if r.status != 200 || r.body["status"] != "approved" {
				t.Fatalf("waiter got %d %v", r.status, r.body)
			}
			// From the moment the approval was sent: replica 1 may answer
			// its waiter before replica 3's own response arrives.
			lag := r.at.Sub(sent)
			if lag > 2*time.Second {
				t.Fatalf("waiter released %v after the approval was sent (held %v): not woken by the other replica", lag, r.at.Sub(began))
			}
			t.Logf("waiter on replica 1 released %v after the approval was sent to replica 3 (which answered in %v)",
				lag.Round(time.Millisecond), approved.Sub(sent).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Fatal("waiter on replica 1 still held 10s after the approval on replica 3")
		}
	})

	t.Run("rolling restart under load fails no request", func(t *testing.T) {
		results := c.load(6)
		time.Sleep(500 * time.Millisecond)
		for i := range 3 {
			old := c.replica(i)
			// As a load balancer with a preStop delay does: out of rotation
			// first, then SIGTERM once requests already sent have arrived.
			c.set(i, nil)
			time.Sleep(200 * time.Millisecond)
			old.signal(syscall.SIGTERM)
			if code := old.wait(30 * time.Second); code != 0 {
				t.Fatalf("replica %d exited %d after SIGTERM:\n%s", i+1, code, old.stderr)
			}
			if _, ok := old.logLine(time.Second, msgIs("stopped")); !ok {
				t.Fatalf("replica %d did not drain:\n%s", i+1, old.stderr)
			}
			// The new process outlives this subtest: the next ones use it.
			d := startDaemon(c.t, c.cfgs[i], c.env)
			c.awaitReady(t, d)
			c.set(i, d)
			time.Sleep(300 * time.Millisecond)
		}
		all := results()
		failed, stored := 0, 0
		for _, o := range all {
			if !o.ok() {
				failed++
				if failed <= 5 {
					t.Errorf("replica %d: status %d: %s", o.replica+1, o.status, o.err)
				}
			}
			if o.id != "" {
				stored++
			}
		}
		if failed > 0 {
			t.Fatalf("%d of %d requests failed during the rolling restart", failed, len(all))
		}
		if len(all) < 60 {
			t.Fatalf("only %d requests during the restart: load too thin to prove anything", len(all))
		}
		for _, o := range all {
			if o.id != "" {
				if st, _ := c.admin(t, 0, "GET", "/admin/reviews/"+o.id, ""); st != 200 {
					t.Fatalf("review %s (422 during the restart) not in the store: %d", o.id, st)
				}
			}
		}
		t.Logf("%d requests (%d stored 422s) through a rolling restart of 3 replicas, none failed", len(all), stored)
	})

	t.Run("kill -9 of one replica under load loses no item a client was told about", func(t *testing.T) {
		results := c.load(8)
		time.Sleep(time.Second)
		victim := c.replica(1)
		victim.signal(syscall.SIGKILL) // requests are in flight on it
		<-victim.done
		c.set(1, nil) // the balancer notices it is gone
		time.Sleep(time.Second)
		all := results()
		var ids []string
		onVictim := 0
		for _, o := range all {
			if o.id != "" {
				ids = append(ids, o.id)
				if o.replica == 1 {
					onVictim++
				}
			} else if !o.ok() && o.replica != 1 {
				t.Errorf("replica %d failed a request while replica 2 died: %d %s", o.replica+1, o.status, o.err)
			}
		}
		if onVictim == 0 {
			t.Fatal("no 422 came from the killed replica: nothing proven")
		}
		// The killed replica's spool must be empty: each 422 it sent was in
		// PostgreSQL before the client heard of it.
		if _, err := os.Stat(filepath.Join(filepath.Dir(c.cfgs[1]), "review-spool.jsonl")); err == nil {
			t.Fatal("the killed replica spooled items: the store write was not durable before the 422")
		}
		for _, id := range ids {
			if st, m := c.admin(t, 2, "GET", "/admin/reviews/"+id, ""); st != 200 || m["id"] != id {
				t.Fatalf("review %s lost after kill -9: %d %v", id, st, m)
			}
		}
		t.Logf("%d stored 422s (%d from the killed replica) all in the store after kill -9", len(ids), onVictim)
	})

	for i := range 3 {
		if d := c.replica(i); d != nil {
			d.assertNoSecrets()
			if strings.Contains(d.stderr.String(), c.env["CONTRACTD_REVIEW_DSN"]) {
				t.Errorf("replica %d logged the DSN", i+1)
			}
		}
	}
}

// The shared rate limit (server.rate_limit.store: redis) holds across
// three replicas: clients hammering all three through the balancer for 5 s
// get the configured rate (burst + rate × time) within 10 %, not three
// times it. The same load with the memory store is run first as the
// control: there each replica allows the full rate on its own.
func TestReplicasSharedRateLimit(t *testing.T) {
	up := newUpstream(t, byModel)
	up.SetQuiet(true)
	const rate, burst = 40.0, 20.0
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			o := clusterOpts{upstream: up.URL(),
				rateLimit: fmt.Sprintf("{requests_per_second: %g, burst: %g, store: %s}", rate, burst, store)}
			if store == "redis" {
				// timeout 2s: at the default 100 ms a call stalled by an
				// overloaded 2-core machine fails open and lets one extra through.
				o.rateLimit = fmt.Sprintf("{requests_per_second: %g, burst: %g, store: redis, redis_url_env: RL_REDIS_URL, timeout: 2s}", rate, burst)
				o.env = []string{"RL_REDIS_URL=" + testkit.RedisURL(t)}
			}
			c := startCluster(t, 3, o)
			var ok, limited, other atomic.Int64
			perReplica := make([]atomic.Int64, 3)
			start := time.Now()
			stop := testkit.Repeat(12, func(int, int) bool {
				o := c.do(false)
				switch o.status {
				case 200:
					ok.Add(1)
					perReplica[o.replica].Add(1)
				case 429:
					limited.Add(1)
				default:
					other.Add(1)
				}
				return true
			})
			time.Sleep(5 * time.Second)
			stop()
			el := time.Since(start)
			want := burst + rate*el.Seconds()
			got := float64(ok.Load())
			t.Logf("%s store: %d allowed (%d, %d, %d per replica), %d limited in %v; the configured rate allows %.0f",
				store, ok.Load(), perReplica[0].Load(), perReplica[1].Load(), perReplica[2].Load(), limited.Load(), el.Round(time.Millisecond), want)
			if other.Load() > 0 {
				t.Fatalf("%d requests neither 200 nor 429", other.Load())
			}
			if limited.Load() < int64(got) {
				t.Fatalf("offered load too thin to test the limit: %d limited, %d allowed", limited.Load(), ok.Load())
			}
			switch store {
			case "redis":
				if got < 0.9*want || got > 1.1*want {
					t.Fatalf("3 replicas on one Redis allowed %.0f in %v, want %.0f ± 10%%", got, el, want)
				}
			case "memory":
				// Control: three private buckets allow about three times it.
				if got < 2*want {
					t.Fatalf("memory store allowed %.0f, want about 3 × %.0f: the control does not show per-replica buckets", got, want)
				}
			}
		})
	}
}

// PostgreSQL down at start and again while serving (its own throwaway
// server, stopped and restarted): serve starts and stays ready, each 422
// is spooled (stored: true), and once the server is back the spool drains
// into it and the items resolve as usual.
func TestPostgresOutage(t *testing.T) {
	up := newUpstream(t, byModel)
	srv := testkit.StartPostgres(t)
	srv.Pause(t)
	dir := t.TempDir()
	env := baseEnv()
	env["CONTRACTD_REVIEW_DSN"] = srv.DSN
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL()})+"\nreview:\n  store: postgres\n  dsn_env: CONTRACTD_REVIEW_DSN\n")
	d := startDaemon(t, cfg, env)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	spool := filepath.Join(dir, "review-spool.jsonl")

	outage := func(phase string) []string {
		t.Helper()
		if st, _ := adminGet(t, d, "/readyz"); st != 200 {
			t.Fatalf("%s: not ready with the store down: %d", phase, st)
		}
		var ids []string
		for range 3 {
			id, ok := badReview(client, d)
			if !ok {
				t.Fatalf("%s: 422 not stored (spooled)", phase)
			}
			ids = append(ids, id)
		}
		b, err := os.ReadFile(spool)
		if err != nil {
			t.Fatalf("%s: no spool: %v", phase, err)
		}
		for _, id := range ids {
			if !strings.Contains(string(b), id) {
				t.Fatalf("%s: %s not in the spool", phase, id)
			}
		}
		return ids
	}
	drained := func(phase string, ids []string) {
		t.Helper()
		if !waitFor(20*time.Second, func() bool { _, err := os.Stat(spool); return os.IsNotExist(err) }) {
			t.Fatalf("%s: spool never drained:\n%s", phase, d.stderr)
		}
		// In PostgreSQL itself, not only findable through the spool.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM reviews WHERE id = ANY($1)`, ids).Scan(&n); err != nil || n != len(ids) {
			t.Fatalf("%s: %d of %d items in PostgreSQL (%v)", phase, n, len(ids), err)
		}
	}

	atStart := outage("down at start")
	if _, ok := d.logLine(5*time.Second, msgIs("review store unavailable; items are spooled")); !ok {
		t.Fatal("store failure not logged")
	}
	srv.Resume(t)
	drained("after start", atStart)

	srv.Pause(t)
	whileServing := outage("down while serving")
	srv.Resume(t)
	drained("after the second outage", whileServing)

	// The pool reconnected: resolutions work as before.
	if !waitFor(15*time.Second, func() bool {
		req, _ := http.NewRequest("POST", "http://"+d.Admin+"/admin/reviews/"+whileServing[0]+"/approve", strings.NewReader(approveBody))
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("approve after the outage never succeeded:\n%s", d.stderr)
	}
	if strings.Contains(d.stderr.String(), srv.DSN) {
		t.Error("the DSN reached the log")
	}
}
