package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const strictSchema = `{"type":"object","required":["sentiment","summary"],"additionalProperties":false,
  "properties":{"sentiment":{"type":"string"},"summary":{"type":"string"}}}`

const confidenceSchema = `{"type":"object","required":["sentiment","summary","confidence"],"additionalProperties":false,
  "properties":{"sentiment":{"type":"string"},"summary":{"type":"string"},"confidence":{"type":"number"}}}`

// TestReloadFollowsFilesOfARefusedConfig: a deploy that writes the config
// before the schema file it names (in a directory that does not exist yet)
// gets a refused reload, counted and logged with its reason; creating the
// directory and the file then reloads by itself, without a SIGHUP. A schema
// directory replaced whole (removed, created again) is followed too.
func TestReloadFollowsFilesOfARefusedConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up, d := serveBase(t, dir)
	assertServes(t, d, "review-sentiment", goodContent)

	next := renderConfig(cfgOpts{upstream: up.URL(), schema: "schemas/sentiment.schema.json", routes: extraRoute("review-next", "fake-neutral")})
	m := wantReloadRefused(t, d, dir, next, "review-next", "a config naming a missing schema file")
	if p, _ := m["problem"].(string); !strings.Contains(p, "cannot read schemas/sentiment.schema.json") {
		t.Errorf("refused reload logged %v, want the missing schema file named", m)
	}

	// The schema arrives after the config, in a new directory.
	time.Sleep(500 * time.Millisecond)
	if err := os.Mkdir(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(dir, "schemas", "sentiment.schema.json")
	start := time.Now()
	writeFile(t, schema, strictSchema)
	waitRoute(t, d, "review-next", start, reloadWindow)
	assertServes(t, d, "review-sentiment", goodContent)

	// The schema directory replaced whole: removed, then created again
	// with a schema the outputs no longer meet.
	time.Sleep(500 * time.Millisecond)
	if err := os.RemoveAll(filepath.Join(dir, "schemas")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the removal's reload is refused: the file is gone
	if err := os.Mkdir(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, schema, confidenceSchema)
	status := 0
	if !waitFor(reloadWindow+time.Second, func() bool {
		resp, _ := postNoFatal(d, reviewBody("review-sentiment", "Fine."))
		if resp != nil {
			status = resp.StatusCode
		}
		return status == 422
	}) {
		t.Fatalf("the recreated schema directory's file did not apply (last status %d)", status)
	}
	d.assertNoSecrets()
}

// TestReloadCoalescesAndDoesNotStarve: a config rewritten every 100 ms for
// 4 s reloads within 2 s of the first write (docs/config.md; the harness's usual
// second of slack), though the writes never pause that long, and the 40
// writes coalesce into a few reloads.
func TestReloadCoalescesAndDoesNotStarve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up, d := serveBase(t, dir)
	assertServes(t, d, "review-sentiment", goodContent)

	next := renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-busy", "fake-neutral")})
	stop := make(chan struct{})
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			if err := os.WriteFile(filepath.Join(dir, "contractd.yaml"), []byte(next+fmt.Sprintf("# write %d\n", i)), 0o644); err != nil {
				t.Error(err)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	appeared := waitFor(reloadWindow+time.Second, func() bool { return contains(modelIDs(t, d), "review-busy") })
	took := time.Since(start)
	time.Sleep(4*time.Second - took)
	close(stop)
	<-done
	if !appeared {
		t.Fatalf("no reload within %v while the config kept changing", reloadWindow+time.Second)
	}
	t.Logf("reloaded %v after the first of the writes", took.Round(time.Millisecond))
	time.Sleep(time.Second) // the last write's reload
	if n := d.countLog(reloaded("file")); n < 2 || n > 6 {
		t.Errorf("%d reloads for 40 writes in 4 s, want them coalesced into 2 to 6", n)
	}
	if n := d.countLog(refused("file")); n != 0 {
		t.Errorf("%d refused reloads of a valid config", n)
	}
}

// TestReloadNamesRestartOnlyKeys: a reload that changes settings read only
// at start applies the rest and logs the keys that wait for a restart. The
// settings in effect are the ones serve started with: a later reload that
// still differs from them says so again (it said nothing, comparing with
// the config the last reload swapped in, though the store, webhook and
// listeners were still the first ones), and one that puts them back says
// nothing (it warned that they would apply on restart: they were running).
func TestReloadNamesRestartOnlyKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up, d := serveBase(t, dir)
	next := renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-later", "fake-neutral")})
	next = edited(t, next, "admin_listen: 127.0.0.1:0", "admin_listen: localhost:0")
	next = edited(t, next, "audit:\n", "review: {store: none}\n\naudit:\n")
	start := time.Now()
	writeConfig(t, dir, next)
	waitRoute(t, d, "review-later", start, reloadWindow)
	m, ok := d.logLine(time.Second, msgIs("these settings changed but apply only on restart"))
	if !ok {
		t.Fatal("no log line naming the settings that apply on restart")
	}
	if keys := fmt.Sprint(m["keys"]); keys != "[server.admin_listen review]" {
		t.Errorf("restart-only keys %s, want [server.admin_listen review]", keys)
	}
	// Still the admin listener it started with.
	if ok, _ := reloadMetric(t, d); ok != 1 {
		t.Errorf("%d successful reloads counted on the admin listener it started with, want 1", ok)
	}
	warned := msgIs("these settings changed but apply only on restart")

	// Another route, the restart-only changes kept: they still wait.
	again := next + extraRoute("review-later2", "fake-neutral")
	start = time.Now()
	writeConfig(t, dir, again)
	waitRoute(t, d, "review-later2", start, reloadWindow)
	if !waitFor(time.Second, func() bool { return d.countLog(warned) == 2 }) {
		t.Fatalf("%d restart-only warnings after a second reload that keeps the changes, want 2", d.countLog(warned))
	}
	var last map[string]any
	for _, m := range d.stderr.JSON() {
		if warned(m) {
			last = m
		}
	}
	if keys := fmt.Sprint(last["keys"]); keys != "[server.admin_listen review]" {
		t.Errorf("second reload's restart-only keys %s, want [server.admin_listen review]", keys)
	}

	// The started config's listener and review section back, one more
	// route: nothing waits for a restart.
	back := renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-later", "fake-neutral") + extraRoute("review-later3", "fake-neutral")})
	start = time.Now()
	writeConfig(t, dir, back)
	waitRoute(t, d, "review-later3", start, reloadWindow)
	time.Sleep(200 * time.Millisecond)
	if n := d.countLog(warned); n != 2 {
		t.Errorf("%d restart-only warnings after a reload back to the running settings, want still 2", n)
	}
}

// TestReloadSwitchesKeysAndUpstream: a reload that names another client
// key variable and another upstream base_url and key variable applies to
// the next request (docs/config.md: every server setting but the listen
// addresses follows reloads; upstreams are part of the Runtime): the old
// client key is refused, the new one served, by the new upstream with its
// key.
func TestReloadSwitchesKeysAndUpstream(t *testing.T) {
	t.Parallel()
	up1, up2 := newUpstream(t, byModel), newUpstream(t, byModel)
	dir := t.TempDir()
	env := baseEnv()
	env["CONTRACTD_API_KEYS_NEXT"] = "sk-test-e2e-next"
	env["UPSTREAM_KEY_NEXT"] = "sk-test-e2e-upstream-next"
	base := renderConfig(cfgOpts{upstream: up1.URL()})
	d := startDaemon(t, writeConfig(t, dir, base), env)
	ask := func(key string) int {
		resp, _ := postAs(t, d, key, reviewBody("review-sentiment", "Fine."))
		return resp.StatusCode
	}
	if s := ask(clientKey); s != 200 || len(up1.Requests()) != 1 {
		t.Fatalf("premise: %d, %d calls upstream", s, len(up1.Requests()))
	}
	next := edited(t, renderConfig(cfgOpts{upstream: up2.URL()}), "api_keys_env: CONTRACTD_API_KEYS", "api_keys_env: CONTRACTD_API_KEYS_NEXT")
	next = edited(t, next, "api_key_env: OPENAI_API_KEY", "api_key_env: UPSTREAM_KEY_NEXT")
	writeConfig(t, dir, next)
	if _, ok := d.logLine(reloadWindow+time.Second, reloaded("file")); !ok {
		t.Fatal("no reload")
	}
	if s := ask(clientKey); s != 401 {
		t.Errorf("the old client key after the reload: %d, want 401", s)
	}
	if s := ask("sk-test-e2e-next"); s != 200 {
		t.Errorf("the new client key after the reload: %d, want 200", s)
	}
	if n := len(up1.Requests()); n != 1 {
		t.Errorf("the old upstream got %d calls, want the one before the reload", n)
	}
	reqs := up2.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer sk-test-e2e-upstream-next" {
		t.Fatalf("the new upstream got %d calls (want 1, with its own key)", len(reqs))
	}
	for _, k := range []string{clientKey, "sk-test-e2e-next", upstreamKey, "sk-test-e2e-upstream-next"} {
		if strings.Contains(d.stderr.String(), k) {
			t.Errorf("a key is in the log")
		}
	}
}

// TestReloadRefusedWhenAuditCannotOpen: a reload to an audit file that
// cannot be opened is refused as a whole (docs/config.md: the new
// destination is opened first): logged with the reason, counted, the
// running config kept, its audit still written.
func TestReloadRefusedWhenAuditCannotOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up, d := serveBase(t, dir)
	next := renderConfig(cfgOpts{upstream: up.URL(), audit: "sink: file\n  path: no-such-dir/audit.jsonl",
		routes: extraRoute("review-unaudited", "fake-neutral")})
	m := wantReloadRefused(t, d, dir, next, "review-unaudited", "a reload to an audit file that cannot be opened")
	if e, _ := m["error"].(string); !strings.Contains(e, "no-such-dir") {
		t.Errorf("refused reload logged %v, want the audit path named", m)
	}
	before := len(d.stdout.Lines())
	assertServes(t, d, "review-sentiment", goodContent)
	if !waitFor(time.Second, func() bool { return len(d.stdout.Lines()) > before }) {
		t.Error("the running config's audit (stdout) got no line after the refused reload")
	}
}

// wantReloadRefused writes next as dir's config and wants the reload it
// causes refused (what: the change, for the failure message): the refusal
// logged (its line is returned), one failed reload counted, and route,
// which only next has, not served.
func wantReloadRefused(t *testing.T, d *daemon, dir, next, route, what string) map[string]any {
	t.Helper()
	writeConfig(t, dir, next)
	m, ok := d.logLine(reloadWindow+time.Second, refused("file"))
	if !ok {
		t.Fatalf("%s was not refused", what)
	}
	if _, bad := reloadMetric(t, d); bad != 1 {
		t.Errorf("%d failed reloads counted, want 1", bad)
	}
	if contains(modelIDs(t, d), route) {
		t.Fatalf("%s: the refused config's route %s is served", what, route)
	}
	return m
}
