package e2e

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A config may hold contracts and labels alone, for offline check, but
// serve needs at least one route: a routeless config
// stops serve at start, before it listens, and is refused as a reload
// (the running routes keep serving).
func TestServeNeedsARoute(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	full := renderConfig(cfgOpts{upstream: up.URL()})
	i := strings.LastIndex(full, "\nroutes:")
	if i < 0 {
		t.Fatal("test premise: the base config has no routes key")
	}
	routeless := full[:i+1]

	cfg := writeConfig(t, t.TempDir(), routeless)
	startProcess(t, baseEnv(), "serve", "-c", cfg).refusesToStart("serve needs at least one route")
	// validate accepts the same file (a prompt no route uses is a warning).
	// with a warning that serve needs a route (it said nothing).
	if _, errOut, code := runCLI(t, "", "validate", "-c", cfg); code != 0 || !strings.Contains(errOut, "warning: "+cfg+": no routes: serve needs at least one") {
		t.Errorf("validate: exit %d, want 0 and the no-routes warning\n%s", code, errOut)
	}

	dir := t.TempDir()
	d := startDaemon(t, writeConfig(t, dir, full), baseEnv())
	assertServes(t, d, "review-sentiment", goodContent)
	writeConfig(t, dir, routeless)
	d.signal(syscall.SIGHUP)
	line, ok := d.logLine(reloadWindow, refused("sighup"))
	if !ok {
		t.Fatalf("the routeless config was not refused on SIGHUP")
	}
	if s, _ := line["error"].(string); !strings.Contains(s, "serve needs at least one route") {
		t.Errorf("refusal %v does not say why", line)
	}
	if ids := modelIDs(t, d); !contains(ids, "review-sentiment") {
		t.Errorf("after the refused reload the models are %v", ids)
	}
	assertServes(t, d, "review-sentiment", goodContent)
	if d.exited() {
		t.Fatal("contractd exited")
	}
}

// api_keys_env unset, or its variable empty: no auth, warned at start.
// Without keys the API answers requests that
// carry no Authorization header, and the start-up log says so once.
func TestServeWithoutClientKeysWarns(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(map[string]string){
		"unset": func(env map[string]string) { delete(env, "CONTRACTD_API_KEYS") },
		"empty": func(env map[string]string) { env["CONTRACTD_API_KEYS"] = "" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, byModel)
			env := baseEnv()
			edit(env)
			d := startDaemon(t, writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()})), env)
			warned := func(m map[string]any) bool {
				s, _ := m["msg"].(string)
				return m["level"] == "WARN" && strings.Contains(s, "no client API keys configured")
			}
			if _, ok := d.logLine(2*time.Second, warned); !ok {
				t.Errorf("no start-up warning about running without client keys:\n%s", d.stderr.String())
			}
			resp, b := postAs(t, d, "", reviewBody("review-sentiment", "The delivery was fast and the food was great."))
			if resp.StatusCode != 200 {
				t.Errorf("no Authorization header without keys: status %d: %s", resp.StatusCode, b)
			}
			if n := d.countLog(warned); n != 1 {
				t.Errorf("the warning was logged %d times, want once", n)
			}
		})
	}
}

// A reload never turns client authentication off: a new config whose
// api_keys_env names a variable that holds no key (a typo in the name, the
// line removed) is refused while keys are in force, and the API keeps
// refusing requests without a key. It was installed: every request
// was answered without a key, and not a line said so (the no-keys warning
// is written at start only). Restart to serve without keys.
func TestReloadNeverDropsClientAuth(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	base := renderConfig(cfgOpts{upstream: up.URL()})
	d := startDaemon(t, writeConfig(t, dir, base), baseEnv())
	noKey := func() int {
		resp, _ := postAs(t, d, "", reviewBody("review-sentiment", "The delivery was fast and the food was great."))
		return resp.StatusCode
	}
	if s := noKey(); s != 401 {
		t.Fatalf("premise: without a key before the reload: %d", s)
	}
	for i, edit := range []string{
		"  api_keys_env: CONTRACTD_API_KEYZ\n", // a variable not set
		"",                                     // the line removed
	} {
		writeConfig(t, dir, edited(t, base, "  api_keys_env: CONTRACTD_API_KEYS\n", edit))
		if !d.sighup(reloadWindow, refused("sighup")) {
			t.Errorf("edit %d: the reload that leaves no client key was not refused", i)
		}
		if s := noKey(); s != 401 {
			t.Errorf("edit %d: after the reload a request without a key got %d, want 401", i, s)
		}
		assertServes(t, d, "review-sentiment", goodContent)
	}
	if strings.Contains(d.stderr.String(), clientKey) {
		t.Error("the client key is in the log")
	}
}

// api_keys_env set to separators only (" , ", as "${K1},${K2}" renders
// with both unset) holds no key: serve refuses to start, naming the
// variable and not its value, instead of serving every request without
// a key as it did (unset or empty still means no auth, warned).
func TestServeRefusesClientKeysThatHoldNoKey(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	env := baseEnv()
	env["CONTRACTD_API_KEYS"] = " , "
	startProcess(t, env, "serve", "-c", writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()}))).
		refusesToStart("CONTRACTD_API_KEYS holds no key")
}

// Nor does a reload turn the admin keys off: with admin_keys_env in force,
// a new config without it (which would leave the admin listener open to
// anyone) is refused and /admin/* keeps asking for an admin key.
func TestReloadNeverDropsAdminAuth(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	base := renderConfig(cfgOpts{upstream: up.URL()})
	keyed := renderConfig(cfgOpts{upstream: up.URL(), server: "  admin_keys_env: CONTRACTD_ADMIN_KEYS\n"})
	env := baseEnv()
	env["CONTRACTD_ADMIN_KEYS"] = "e2e-admin-key"
	d := startDaemon(t, writeConfig(t, dir, keyed), env)
	if d.Admin == "" {
		t.Fatal("premise: the base config has an admin listener")
	}
	list := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.Admin+"/admin/reviews", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// The reviewer list answers 503 until the review store is open: serve
	// waits up to 2 s for it before listening, then opens it in the
	// background (a slow start under load can take longer).
	if _, ok := d.logLine(30*time.Second, msgIs("review store open")); !ok {
		t.Fatalf("premise: the review store never opened:\n%s", d.stderr)
	}
	if s, k := list(""), list("e2e-admin-key"); s != 401 || k != 200 {
		t.Fatalf("premise: /admin/reviews without a key %d, with the admin key %d", s, k)
	}
	writeConfig(t, dir, base)
	if !d.sighup(reloadWindow, refused("sighup")) {
		t.Error("the reload without admin_keys_env was not refused")
	}
	if s := list(""); s != 401 {
		t.Errorf("after the reload /admin/reviews without a key got %d, want 401", s)
	}
	if strings.Contains(d.stderr.String(), "e2e-admin-key") {
		t.Error("the admin key is in the log")
	}
}
