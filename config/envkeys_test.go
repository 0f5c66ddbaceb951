package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Keys ending in _env name a variable; their values are not expanded. A value
// such as ${OPENAI_API_KEY} in api_key_env is a common slip; expanded, the
// key itself would be printed in the problem ("sk-…" is not an environment
// variable name) on validate's stdout and serve's log.
func TestEnvKeysAreNotExpanded(t *testing.T) {
	const secret = "sk-envkeys-secret-value"
	env := map[string]string{"ENVKEYS_TEST_SECRET": secret}
	ups := func(extra string) string {
		return "upstreams: [{name: up, base_url: \"http://127.0.0.1:1/v1\"" + extra + "}]\n" +
			strings.TrimPrefix(base, "\nupstreams: [{name: up, base_url: \"http://127.0.0.1:1/v1\"}]\n")
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"upstreams api_key_env", ups(`, api_key_env: "${ENVKEYS_TEST_SECRET}"`),
			`upstreams[0].api_key_env: "${ENVKEYS_TEST_SECRET}" is not an environment variable name`},
		{"server api_keys_env", "server: {api_keys_env: \"${ENVKEYS_TEST_SECRET}\"}\n" + base,
			`server.api_keys_env: "${ENVKEYS_TEST_SECRET}" is not an environment variable name`},
		{"server admin_keys_env", "server: {admin_keys_env: \"${ENVKEYS_TEST_SECRET}\"}\n" + base,
			`server.admin_keys_env: "${ENVKEYS_TEST_SECRET}" is not an environment variable name`},
		{"rate_limit redis_url_env", "server: {rate_limit: {requests_per_second: 5, store: redis, redis_url_env: \"${ENVKEYS_TEST_SECRET}\"}}\n" + base,
			`server.rate_limit.redis_url_env: "${ENVKEYS_TEST_SECRET}" is not an environment variable name`},
		// Unset: still refused as a name, not reported as an unset variable.
		{"unset in api_key_env", ups(`, api_key_env: "${ENVKEYS_TEST_UNSET}"`),
			`upstreams[0].api_key_env: "${ENVKEYS_TEST_UNSET}" is not an environment variable name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, tc.yaml, env)
			wantProblem(t, got, tc.want)
			for _, p := range got {
				if strings.Contains(p, secret) {
					t.Errorf("a problem prints the variable's value: %s", p)
				}
			}
		})
	}
	// Other strings of the same sections are still expanded.
	got := problemsOf(t, ups(`, api_key_env: ENVKEYS_TEST_SECRET`)+"server: {listen: \"${ENVKEYS_TEST_UNSET}\"}\n", env)
	wantProblem(t, got, "server.listen: environment variable ENVKEYS_TEST_UNSET is not set")
}

// An unquoted ${VAR} is typed by what it expands to: numbers and booleans
// fill integer, number and boolean keys; a quoted one stays a string, like
// a quoted literal; a string key takes the expanded text as it is.
func TestExpandedValuesAreTyped(t *testing.T) {
	env := map[string]string{"ENVKEYS_N": "2048", "ENVKEYS_B": "true", "ENVKEYS_T": "5s", "ENVKEYS_R": "3",
		"ENVKEYS_HEX": "0x10", "ENVKEYS_ADDR": "127.0.0.1:18080", "ENVKEYS_EMPTY": "", "ENVKEYS_NUMSTR": "8080"}
	upstream := func(extra string) string {
		return "upstreams:\n  - name: up\n    base_url: \"http://127.0.0.1:1/v1\"\n" + extra +
			strings.TrimPrefix(base, "\nupstreams: [{name: up, base_url: \"http://127.0.0.1:1/v1\"}]\n")
	}
	load := func(t *testing.T, yaml string) *Runtime {
		t.Helper()
		if got := problemsOf(t, yaml, env); len(got) != 0 {
			t.Fatalf("problems: %q", got)
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "c.yaml")
		_ = os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
		_ = os.WriteFile(filepath.Join(dir, "schemas", "ok.json"), []byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`), 0o644)
		_ = os.WriteFile(p, []byte(yaml), 0o644)
		rt, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	rt := load(t, "server:\n  max_body_bytes: ${ENVKEYS_N}\n  request_timeout: ${ENVKEYS_T}\n  max_connections: ${ENVKEYS_HEX}\n  listen: ${ENVKEYS_ADDR}\n"+
		"audit:\n  include_content: ${ENVKEYS_B}\n"+base)
	if s := rt.Server; s.MaxBodyBytes != 2048 || s.RequestTimeout != 5*time.Second || s.MaxConnections != 16 || s.Listen != "127.0.0.1:18080" {
		t.Errorf("server %+v", s)
	}
	if !rt.Audit.IncludeContent {
		t.Error("include_content: ${ENVKEYS_B} (true) not applied")
	}
	if up := load(t, upstream("    max_retries: ${ENVKEYS_R}\n")).Upstreams["up"]; up.MaxRetries != 3 {
		t.Errorf("max_retries %d, want 3", up.MaxRetries)
	}
	// A string key keeps the text: a number-like value is not reformatted.
	if rt := load(t, "audit:\n  sink: file\n  path: ${ENVKEYS_NUMSTR}\n"+base); filepath.Base(rt.Audit.Path) != "8080" {
		t.Errorf("audit.path %q, want the file 8080 beside the config", rt.Audit.Path)
	}
	// Quoted, it is a string, which an integer key refuses, as it refuses "2048".
	wantProblem(t, problemsOf(t, "server:\n  max_body_bytes: \"${ENVKEYS_N}\"\n"+base, env), `server.max_body_bytes: must be an integer, not "2048"`)
	// Not a number: still refused, naming the expanded text.
	wantProblem(t, problemsOf(t, "server:\n  max_body_bytes: ${ENVKEYS_T}\n"+base, env), `server.max_body_bytes: must be an integer, not "5s"`)
	// An empty expansion is an empty string, not a key left out: listen ""
	// is refused rather than silently defaulted.
	got := problemsOf(t, "server:\n  listen: ${ENVKEYS_EMPTY}\n"+base, env)
	before := problemsOf(t, "server:\n  listen: \"\"\n"+base, env)
	if strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Errorf("listen: ${EMPTY} gives %q, listen: \"\" gives %q", got, before)
	}
}
