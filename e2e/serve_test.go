package e2e

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reloadWindow is the bound: a config file change reloads within 2 s.
const reloadWindow = 2 * time.Second

func reloaded(trigger string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["msg"] == "config reloaded" && m["trigger"] == trigger }
}

func refused(trigger string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		s, _ := m["msg"].(string)
		return strings.HasPrefix(s, "config reload refused") && m["trigger"] == trigger
	}
}

// waitRoute waits until GET /v1/models lists route and returns how long
// that took from start.
func waitRoute(t *testing.T, d *daemon, route string, start time.Time, within time.Duration) time.Duration {
	t.Helper()
	if !waitFor(within+time.Second, func() bool { return contains(modelIDs(t, d), route) }) {
		t.Fatalf("route %q did not appear (models %v)", route, modelIDs(t, d))
	}
	took := time.Since(start)
	if took > within {
		t.Errorf("route %q appeared after %v, want within %v", route, took.Round(time.Millisecond), within)
	}
	return took
}

// assertServes checks that a contract route answers 200 with want.
func assertServes(t *testing.T, d *daemon, route, want string) {
	t.Helper()
	resp, body := post(t, d, reviewBody(route, "The delivery was fast and the food was great."))
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d: %s", route, resp.StatusCode, body)
	}
	var c struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content != want {
		t.Fatalf("%s: body %s, want content %s", route, body, want)
	}
}

func TestReloadOnFileChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "contractd.yaml")
	up, d := serveBase(t, dir)
	assertServes(t, d, "review-sentiment", goodContent)
	if contains(modelIDs(t, d), "review-new") {
		t.Fatal("review-new served before it was configured")
	}

	// A valid change: the new route appears within 2 s, with no signal.
	start := time.Now()
	writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-new", "fake-neutral")}))
	took := waitRoute(t, d, "review-new", start, reloadWindow)
	t.Logf("file change reloaded in %v", took.Round(time.Millisecond))
	assertServes(t, d, "review-new", neutralContent)
	assertServes(t, d, "review-sentiment", goodContent)
	if _, ok := d.logLine(time.Second, reloaded("file")); !ok {
		t.Errorf("no \"config reloaded\" log line with trigger file")
	}

	// An invalid change (a route naming a contract that does not exist) is
	// refused; the running config keeps serving.
	bad := extraRoute("review-new", "fake-neutral") + strings.ReplaceAll(extraRoute("review-invalid", "fake-good"), "contract: sentiment_v1", "contract: no_such_contract")
	writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), routes: bad}))
	if _, ok := d.logLine(reloadWindow+time.Second, refused("file")); !ok {
		t.Fatalf("the invalid config was not reported as refused")
	}
	ids := modelIDs(t, d)
	if contains(ids, "review-invalid") || !contains(ids, "review-new") || !contains(ids, "review-sentiment") {
		t.Errorf("after a refused reload the models are %v, want the old config's", ids)
	}
	assertServes(t, d, "review-new", neutralContent)
	assertServes(t, d, "review-sentiment", goodContent)

	// The watch survives a refused reload: fixing the file reloads again.
	start = time.Now()
	writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-fixed", "fake-good")}))
	waitRoute(t, d, "review-fixed", start, reloadWindow)
	if ids := modelIDs(t, d); contains(ids, "review-new") {
		t.Errorf("review-new still served after it was removed: %v", ids)
	}
	assertServes(t, d, "review-fixed", goodContent)

	// Editors and deploy tools save by removing and recreating the file;
	// the watch must survive that, and a rename over the file too.
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-recreated", "fake-good")}))
	waitRoute(t, d, "review-recreated", start, reloadWindow)
	tmp := filepath.Join(dir, "next.yaml.tmp")
	writeFile(t, tmp, renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-renamed", "fake-good")}))
	start = time.Now()
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, d, "review-renamed", start, reloadWindow)
	d.assertNoSecrets()
}

func TestReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	schema := filepath.Join(dir, "sentiment.schema.json")
	writeFile(t, schema, `{"type":"object","required":["sentiment","summary"],"additionalProperties":false,
  "properties":{"sentiment":{"type":"string"},"summary":{"type":"string"}}}`)
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), schema: "sentiment.schema.json"}))
	// SIGHUP right after the listeners are up must reload, not kill.
	d := startDaemon(t, cfg, baseEnv())
	d.signal(syscall.SIGHUP)
	if _, ok := d.logLine(2*time.Second, reloaded("sighup")); !ok {
		t.Fatalf("no reload after a SIGHUP at start (exited=%v)", d.exited())
	}
	assertServes(t, d, "review-sentiment", goodContent)

	// The contract's schema file changes (the output now lacks a required
	// member); SIGHUP makes the new contract apply at once.
	writeFile(t, schema, `{"type":"object","required":["sentiment","summary","confidence"],"additionalProperties":false,
  "properties":{"sentiment":{"type":"string"},"summary":{"type":"string"},"confidence":{"type":"number"}}}`)
	if !d.sighup(2*time.Second, reloaded("sighup")) {
		t.Fatalf("no reload after SIGHUP")
	}
	resp, body := post(t, d, reviewBody("review-sentiment", "Fine."))
	if resp.StatusCode != 422 || !strings.Contains(string(body), `"rule":"required"`) {
		t.Fatalf("after SIGHUP with the new schema: status %d: %s", resp.StatusCode, body)
	}

	// A new route in the config file, and SIGHUP: it appears at once.
	start := time.Now()
	writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), schema: "sentiment.schema.json", routes: extraRoute("review-hup", "fake-neutral")}))
	d.signal(syscall.SIGHUP)
	waitRoute(t, d, "review-hup", start, reloadWindow)
	// The file watch reloads the same file too; let that happen now, so
	// that no reload of a valid config is pending below.
	if _, ok := d.logLine(reloadWindow+time.Second, reloaded("file")); !ok {
		t.Fatalf("the config file change was not reloaded")
	}

	// An invalid config (YAML that does not parse) is refused on SIGHUP and
	// the running config keeps serving: its contract too, though the schema
	// file it was loaded from has changed since.
	writeFile(t, schema, `{"type":"object","properties":{"sentiment":{"type":"string"},"summary":{"type":"string"}}}`)
	writeConfig(t, dir, "routes: [\n  - name: broken\n")
	d.signal(syscall.SIGHUP)
	if _, ok := d.logLine(2*time.Second, refused("sighup")); !ok {
		t.Fatalf("the invalid config was not reported as refused")
	}
	ids := modelIDs(t, d)
	if !contains(ids, "review-hup") || !contains(ids, "review-sentiment") || contains(ids, "broken") {
		t.Errorf("after a refused reload the models are %v", ids)
	}
	// Still the old contract (schema files are read at load time only).
	resp, _ = post(t, d, reviewBody("review-sentiment", "Fine."))
	if resp.StatusCode != 422 {
		t.Errorf("after a refused reload: status %d, want the running config's 422", resp.StatusCode)
	}
	if d.exited() {
		t.Fatalf("contractd exited")
	}
	d.assertNoSecrets()
}

func TestSIGTERMDrainsInFlight(t *testing.T) {
	t.Parallel()
	up, d := serveBase(t, t.TempDir())

	type result struct {
		status int
		body   []byte
		at     time.Time
	}
	res := make(chan result, 1)
	go func() {
		resp, body := postNoFatal(d, reviewBody("review-slow", "Slow but tasty."))
		r := result{body: body, at: time.Now()}
		if resp != nil {
			r.status = resp.StatusCode
		}
		res <- r
	}()
	// Wait until the slow request is at the upstream, then ask to stop.
	select {
	case req := <-up.got:
		if req.Body["model"] != "fake-slow" {
			t.Fatalf("unexpected upstream request %s", req.Raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the upstream")
	}
	sent := time.Now()
	d.signal(syscall.SIGTERM)
	if _, ok := d.logLine(5*time.Second, msgIs("draining")); !ok {
		t.Fatal("no draining log line")
	}
	// While draining, new connections are refused...
	if !waitFor(slowDelay/2, func() bool {
		c, err := net.DialTimeout("tcp", d.API, 200*time.Millisecond)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}) {
		t.Errorf("the API still accepts connections while draining")
	}
	refusedAt := time.Now()
	// A SIGHUP while draining (logrotate, a reload script) must neither
	// kill the process nor spoil the clean exit.
	d.signal(syscall.SIGHUP)
	// ...but the in-flight request completes, valid.
	var r result
	select {
	case r = <-res:
	case <-time.After(15 * time.Second):
		t.Fatal("the in-flight request did not complete")
	}
	if r.status != 200 || !strings.Contains(string(r.body), `"content":`+jsonString(goodContent)) {
		t.Fatalf("in-flight request: status %d: %s", r.status, r.body)
	}
	if !r.at.After(refusedAt) {
		t.Errorf("the in-flight request ended before the listener closed; the test proves nothing")
	}
	if code := d.wait(10 * time.Second); code != 0 {
		t.Fatalf("exit code %d after a clean drain, want 0", code)
	}
	t.Logf("exited %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
	if _, ok := d.logLine(0, msgIs("stopped")); !ok {
		t.Errorf("no stopped log line")
	}
	// The drained request was audited.
	var audited bool
	for _, ev := range d.stdout.JSON() {
		if ev["route"] == "review-slow" && ev["outcome"] == "valid" {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no valid audit event for the drained request:\n%s", d.stdout)
	}
	up.assertKeys(t)
	d.assertNoSecrets()
}

func TestSIGTERMIdleExitsZero(t *testing.T) {
	t.Parallel()
	_, d := serveBase(t, t.TempDir())
	d.signal(syscall.SIGTERM)
	if code := d.wait(10 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

func TestServeRefusesUnsetAPIKeyEnv(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()}))
	env := baseEnv()
	delete(env, "OPENAI_API_KEY")
	startProcess(t, env, "serve", "-c", cfg).refusesToStart("OPENAI_API_KEY", "not set")
	if len(up.Requests()) != 0 {
		t.Errorf("the upstream was called")
	}
}

func TestServeRefusesUnsetExpandedVariable(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: "${E2E_UPSTREAM_URL}"}))
	startProcess(t, baseEnv(), "serve", "-c", cfg).refusesToStart("E2E_UPSTREAM_URL")
	// Set, it is expanded.
	env := baseEnv()
	env["E2E_UPSTREAM_URL"] = up.URL()
	d := startDaemon(t, cfg, env)
	assertServes(t, d, "review-sentiment", goodContent)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A change to a contract's schema file alone (no SIGHUP, config untouched)
// reloads within the window, like a change to the config file.
func TestReloadOnSchemaFileChange(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(dir, "schemas", "sentiment.schema.json")
	writeFile(t, schema, `{"type":"object","required":["sentiment","summary"],"additionalProperties":false,
  "properties":{"sentiment":{"type":"string"},"summary":{"type":"string"}}}`)
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), schema: "schemas/sentiment.schema.json"}))
	d := startDaemon(t, cfg, baseEnv())
	assertServes(t, d, "review-sentiment", goodContent)

	start := time.Now()
	writeFile(t, schema, `{"type":"object","required":["sentiment","summary","confidence"],"additionalProperties":false,
  "properties":{"sentiment":{"type":"string"},"summary":{"type":"string"},"confidence":{"type":"number"}}}`)
	status := 0
	if !waitFor(reloadWindow, func() bool {
		resp, _ := postNoFatal(d, reviewBody("review-sentiment", "Fine."))
		if resp != nil {
			status = resp.StatusCode
		}
		return status == 422
	}) {
		t.Fatalf("the schema file change did not apply within %v (last status %d)", reloadWindow, status)
	}
	t.Logf("schema file change applied in %v", time.Since(start).Round(time.Millisecond))
	m, ok := d.logLine(time.Second, reloaded("file"))
	if !ok {
		t.Error(`no "config reloaded" log line with trigger file`)
	}
	// The operator sees the schema change took effect: the reload's hash is
	// not the one logged at start.
	first, ok := d.logLine(time.Second, func(m map[string]any) bool { return m["msg"] == "config loaded" })
	if !ok {
		t.Error(`no "config loaded" log line at start`)
	} else if first["sha256"] == nil || first["sha256"] == m["sha256"] {
		t.Errorf("config loaded sha256 %v, config reloaded %v: want two different hashes", first["sha256"], m["sha256"])
	}
	d.assertNoSecrets()
}
