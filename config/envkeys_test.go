package config

import (
	"strings"
	"testing"
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
