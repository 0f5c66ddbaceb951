package e2e

import (
	"strings"
	"testing"
	"time"
)

// request_timeout follows reloads in the real binary, so an operator can
// raise it for a slow upstream without a restart. A request slower than the running request_timeout gets 504; after a
// SIGHUP reload raises it, the same request completes with the whole
// answer (deadlines are set per request from the config in force).
func TestReloadRaisesRequestTimeout(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(req upstreamRequest, n int) reply {
		return reply{Content: goodContent, Delay: 1500 * time.Millisecond}
	})
	dir := t.TempDir()
	base := renderConfig(cfgOpts{upstream: up.URL()})
	short := edited(t, base, "request_timeout: 20s", "request_timeout: 1s\n  body_read_timeout: 1s")
	cfg := writeConfig(t, dir, short)
	d := startDaemon(t, cfg, baseEnv())
	resp, body := post(t, d, reviewBody("review-sentiment", "Fine."))
	if resp.StatusCode != 504 || !strings.Contains(string(body), `"code":"upstream_timeout"`) {
		t.Fatalf("under request_timeout 1s: %d %s", resp.StatusCode, body)
	}
	writeConfig(t, dir, edited(t, base, "request_timeout: 20s", "request_timeout: 4s"))
	if !d.sighup(3*time.Second, reloaded("sighup")) {
		t.Fatal("no reload after SIGHUP")
	}
	start := time.Now()
	assertServes(t, d, "review-sentiment", goodContent)
	if el := time.Since(start); el < 1400*time.Millisecond {
		t.Errorf("answered in %v; the upstream takes 1.5 s", el)
	}
}
