package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// The offline commands run against the serving config on a machine that
// has none of the server's secrets (a CI runner, a laptop): check, render,
// schema and replay of an audit file do their work; validate and serve,
// which are about serving, name each unset variable.
func TestOfflineCommandsNeedNoServerSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := renderConfig(cfgOpts{upstream: "http://127.0.0.1:9/v1", server: "  admin_keys_env: OFFLINE_E2E_ADMIN_KEYS\n"}) +
		"\nreview:\n  webhook:\n    url: https://hooks.example/x\n    secret_env: OFFLINE_E2E_HOOK_SECRET\n"
	cfg := writeConfig(t, dir, text)
	out := filepath.Join(dir, "out.json")
	writeFile(t, out, goodContent)
	audit := filepath.Join(dir, "audit.jsonl")
	writeFile(t, audit, "")
	env := baseEnv() // neither OFFLINE_E2E_ variable is set

	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // in stdout
	}{
		{"check", []string{"check", "-c", cfg, "--contract", "sentiment_v1", out}, 0, `"valid": true`},
		{"check --route", []string{"check", "-c", cfg, "--route", "review-sentiment", out}, 0, `"valid": true`},
		{"render", []string{"render", "-c", cfg, "--route", "review-sentiment"}, 0, `"model": "fake-good"`},
		{"schema", []string{"schema", "-c", cfg, "--route", "review-sentiment"}, 0, `"sentiment"`},
		{"replay --audit", []string{"replay", "-c", cfg, "--audit", audit}, 0, "no regression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLIEnv(t, env, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.out) {
				t.Errorf("exit %d, want %d; stdout lacks %q:\n%s%s", code, tc.code, tc.out, stdout, stderr)
			}
		})
	}
	t.Run("validate names each unset variable", func(t *testing.T) {
		stdout, stderr, code := runCLIEnv(t, env, "validate", "-c", cfg)
		if code != 1 || !strings.Contains(stdout, "server.admin_keys_env: environment variable OFFLINE_E2E_ADMIN_KEYS is not set") ||
			!strings.Contains(stdout, "review.webhook.secret_env: environment variable OFFLINE_E2E_HOOK_SECRET is not set") {
			t.Errorf("exit %d:\n%s%s", code, stdout, stderr)
		}
	})
	t.Run("serve refuses to start", func(t *testing.T) {
		stdout, stderr, code := runCLIEnv(t, env, "serve", "-c", cfg)
		if code == 0 || !strings.Contains(stderr, "OFFLINE_E2E_ADMIN_KEYS") {
			t.Errorf("exit %d:\n%s%s", code, stdout, stderr)
		}
	})
}
