package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// Two real contractd processes on one Redis share the client's bucket: what
// one allowed, the other refuses. With Redis stopped both fail open, count
// contractd_rate_limit_store_errors_total and log the failure.
func TestRateLimitRedisRealBinary(t *testing.T) {
	up := newUpstream(t, byModel)
	rs := testkit.StartRedis(t, 0)
	cfg := renderConfig(cfgOpts{upstream: up.URL(),
		server: "  rate_limit: {requests_per_second: 0.2, burst: 2, store: redis, redis_url_env: RL_REDIS_URL, timeout: 1s}\n"})
	env := baseEnv()
	env["RL_REDIS_URL"] = rs.URL
	path := writeConfig(t, t.TempDir(), cfg)
	a, b := startDaemon(t, path, env), startDaemon(t, path, env)
	body := reviewBody("review-sentiment", "Fast delivery and great food.")

	for i, d := range []*daemon{a, b} {
		if r, out := post(t, d, body); r.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.StatusCode, out)
		}
	}
	for _, d := range []*daemon{a, b} {
		r, out := post(t, d, body)
		if r.StatusCode != 429 || !strings.Contains(string(out), `"code":"rate_limit_exceeded"`) {
			t.Fatalf("over the shared burst: %d %s", r.StatusCode, out)
		}
		if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 5 {
			t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
		}
	}
	if v := storeErrors(t, a); v != 0 {
		t.Fatalf("store errors before Redis stopped: %v", v)
	}

	rs.Stop()
	for i := 0; i < 3; i++ {
		for _, d := range []*daemon{a, b} {
			if r, out := post(t, d, body); r.StatusCode != 200 {
				t.Fatalf("Redis down: %d %s (the limiter must fail open)", r.StatusCode, out)
			}
		}
	}
	for _, d := range []*daemon{a, b} {
		if v := storeErrors(t, d); v < 1 {
			t.Errorf("contractd_rate_limit_store_errors_total %v after failures", v)
		}
		if _, ok := d.logLine(5*time.Second, msgIs("rate limit store unavailable; requests pass unlimited")); !ok {
			t.Errorf("no log line for the store failure:\n%s", d.stderr)
		}
		if n := d.countLog(msgIs("rate limit store unavailable; requests pass unlimited")); n != 1 {
			t.Errorf("%d failure lines within one log interval, want 1", n)
		}
		if strings.Contains(d.stderr.String(), rs.URL) {
			t.Error("the log quotes the Redis URL")
		}
	}
}

var storeErrRE = regexp.MustCompile(`(?m)^contractd_rate_limit_store_errors_total(?:\{[^}]*\})? (\S+)$`)

func storeErrors(t *testing.T, d *daemon) float64 {
	t.Helper()
	m := storeErrRE.FindSubmatch(d.metrics(t))
	if m == nil {
		t.Fatalf("no contractd_rate_limit_store_errors_total on /metrics")
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
