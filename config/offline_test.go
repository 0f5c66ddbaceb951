package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The offline tools (check, render, schema, replay of an audit file) load
// a serving config whose server secret variables are unset, as on a CI
// runner: LoadOffline accepts it where Load (serve, validate) lists each
// unset variable; every other problem, a variable's bad name included,
// counts for both.
func TestLoadOfflineSkipsServerSecrets(t *testing.T) {
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "schemas", "ok.json"), []byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`), 0o644)
	write := func(yaml string) string {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("OFFLINE_TEST_NOT_A_DSN", "hello")
	t.Setenv("OFFLINE_TEST_NOT_REDIS", "http://h/")
	secrets := "server: {admin_keys_env: OFFLINE_TEST_ADMIN, rate_limit: {requests_per_second: 5, store: redis, redis_url_env: OFFLINE_TEST_REDIS}}\n" +
		"review: {store: postgres, dsn_env: OFFLINE_TEST_DSN, webhook: {url: \"https://h.example/x\", secret_env: OFFLINE_TEST_HOOK}}\n" + base
	p := write(secrets)
	_, err := Load(p)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Load: %v, want the unset variables", err)
	}
	var got []string
	for _, pr := range ce.Problems {
		got = append(got, pr.String())
	}
	for _, want := range []string{
		"server.admin_keys_env: environment variable OFFLINE_TEST_ADMIN is not set",
		"server.rate_limit.redis_url_env: environment variable OFFLINE_TEST_REDIS is not set",
		"review.dsn_env: environment variable OFFLINE_TEST_DSN is not set",
		"review.webhook.secret_env: environment variable OFFLINE_TEST_HOOK is not set",
	} {
		wantProblem(t, got, want)
	}
	if len(got) != 4 {
		t.Errorf("Load: %d problems, want the 4 variables:\n  %s", len(got), strings.Join(got, "\n  "))
	}
	rt, err := LoadOffline(p)
	if err != nil {
		t.Fatalf("LoadOffline: %v", err)
	}
	if rt.Contracts["k"] == nil {
		t.Fatal("LoadOffline compiled no contract")
	}
	// Set but malformed is the same: nothing offline reads the value.
	p = write(strings.NewReplacer("OFFLINE_TEST_DSN", "OFFLINE_TEST_NOT_A_DSN", "OFFLINE_TEST_REDIS", "OFFLINE_TEST_NOT_REDIS").Replace(secrets))
	if _, err := LoadOffline(p); err != nil {
		t.Errorf("LoadOffline with malformed values: %v", err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "does not hold a PostgreSQL DSN") || !strings.Contains(err.Error(), "does not hold a redis://") {
		t.Errorf("Load with malformed values: %v", err)
	}
	// What is wrong in the file itself is wrong offline too.
	for _, bad := range []string{
		"server: {admin_keys_env: \"not a name\"}\n" + base,
		secrets + "routes: [{name: r, upstream: nope, model: m, prompt: p, contract: k, temperature: 1}]\n",
		"server: {listen: \"${OFFLINE_TEST_UNSET_EXPANDED}\"}\n" + base,
	} {
		if _, err := LoadOffline(write(bad)); err == nil {
			t.Errorf("LoadOffline accepted:\n%s", bad)
		}
	}
}
