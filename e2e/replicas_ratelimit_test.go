package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// SPEC §11, issue 11 item 4: three real contractd processes on one
// PostgreSQL and one Redis, requests spread round-robin by the test
// balancer, far more offered than the limit allows: together they allow
// the configured rate (burst + rate × elapsed) within 10% over 5 s, and
// every replica both serves and refuses (the bucket is shared, not split).
func TestReplicasSharedRateLimit(t *testing.T) {
	const (
		rate    = 40.0
		burst   = 20
		run     = 5 * time.Second
		workers = 6
	)
	up := newUpstream(t, byModel)
	env := baseEnv()
	env["CONTRACTD_REVIEW_DSN"] = testkit.PostgresDSN(t)
	env["CONTRACTD_REDIS_URL"] = testkit.StartRedis(t, 0).URL
	cfg := strings.Replace(renderConfig(cfgOpts{upstream: up.URL()}), "  api_keys_env: CONTRACTD_API_KEYS\n",
		"  api_keys_env: CONTRACTD_API_KEYS\n  rate_limit: {requests_per_second: 40, burst: 20, store: redis, timeout: 2s}\n", 1) +
		"\nreview:\n  store: postgres\n  dsn_env: CONTRACTD_REVIEW_DSN\n"
	c := &cluster{t: t, env: env, replicas: make([]*daemon, 3),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	t.Cleanup(c.client.CloseIdleConnections)
	ds := make([]*daemon, 3)
	for i := range ds {
		c.cfgs = append(c.cfgs, writeConfig(t, t.TempDir(), cfg))
		ds[i] = startProcess(t, env, "serve", "-c", c.cfgs[i])
	}
	for i, d := range ds {
		d.awaitListening(c.cfgs[i])
		c.awaitReady(t, d)
		c.replicas[i] = d
	}

	var mu sync.Mutex
	served, refused := make([]int, 3), make([]int, 3)
	var other []string
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < run {
				o := c.do(false)
				mu.Lock()
				switch o.status {
				case 200:
					served[o.replica]++
				case 429:
					refused[o.replica]++
				default:
					if len(other) < 5 {
						other = append(other, o.err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(other) > 0 {
		t.Fatalf("answers other than 200 and 429: %v", other)
	}
	total := served[0] + served[1] + served[2]
	want := burst + rate*elapsed.Seconds()
	t.Logf("3 replicas, %v: served %v (%d), refused %v; the limit allows %.0f", elapsed.Round(time.Millisecond), served, total, refused, want)
	if float64(total) < 0.9*want || float64(total) > 1.1*want {
		t.Errorf("the replicas together served %d, want %.0f ±10%% (one shared bucket)", total, want)
	}
	for i := range 3 {
		if served[i] == 0 || refused[i] == 0 {
			t.Errorf("replica %d served %d and refused %d: every replica must use the shared bucket", i+1, served[i], refused[i])
		}
	}
	// A healthy Redis answers every call (timeout 2s here: the default
	// 100 ms can pass on an overloaded 2-core machine, failing open).
	for i, d := range ds {
		if v := storeErrors(t, d); v != 0 {
			t.Errorf("replica %d: %v store errors on a healthy Redis", i+1, v)
		}
	}
}
