package e2e

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// A SIGHUP that reaches serve while it starts (here: while it waits up to
// the 1 s rate-limit store setup on a Redis that accepts and never answers)
// neither kills it nor is lost: serve starts listening and reloads for it.
// Before, SIGHUP's default action ended the process until the reload watch
// was set up, with nothing logged: `systemctl reload` right after `start`,
// or a logrotate postrotate reload at the wrong moment, stopped the
// service.
func TestSIGHUPWhileStarting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a Redis that never answers
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	up := newUpstream(t, byModel)
	cfg := renderConfig(cfgOpts{upstream: up.URL(),
		server: "  rate_limit: {requests_per_second: 5, burst: 5, store: redis, redis_url_env: RL_REDIS_URL, timeout: 1s}\n"})
	env := baseEnv()
	env["RL_REDIS_URL"] = "redis://" + ln.Addr().String() + "/0"
	path := writeConfig(t, t.TempDir(), cfg)
	d := startProcess(t, env, "serve", "-c", path)
	if _, ok := d.logLine(5*time.Second, msgIs("telemetry")); !ok {
		t.Fatalf("no telemetry line:\n%s", d.stderr)
	}
	if d.countLog(msgIs("listening")) > 0 {
		t.Fatal("serve listened before the signal: the start-up window this test needs has gone")
	}
	d.signal(syscall.SIGHUP)
	d.awaitListening(path)
	if l, ok := d.logLine(5*time.Second, msgIs("config reloaded")); !ok || l["trigger"] != "sighup" {
		t.Errorf("config reloaded line %v (found %v), want trigger sighup", l, ok)
	}
	if d.exited() {
		t.Fatalf("serve exited: %v", d.err)
	}
}
