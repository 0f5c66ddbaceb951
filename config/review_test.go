package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReviewProblems(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string
	}{
		{"unknown key", base + "review: {stroe: sqlite}\n", `review.stroe: unknown key "stroe"`},
		{"unknown webhook key", base + "review: {webhook: {url: \"http://127.0.0.1:1/h\", secret_env: CONTRACTD_TEST_SECRET, sekret: x}}\n", `review.webhook.sekret: unknown key "sekret"`},
		{"unknown store", base + "review: {store: mysql}\n", `review.store: unknown store "mysql" (sqlite, postgres, none)`},
		{"bad retention", base + "review: {retention: forever}\n", `review.retention: invalid duration "forever"`},
		{"bad dedupe window", base + "review: {dedupe_window: soon}\n", `review.dedupe_window: invalid duration "soon"`},
		{"negative dedupe window", base + "review: {dedupe_window: -1s}\n", `review.dedupe_window: invalid duration "-1s"`},
		{"unset dsn env", base + "review: {store: postgres, dsn_env: NOPE_DSN_UNSET}\n", `review.dsn_env: environment variable NOPE_DSN_UNSET is not set`},
		{"default dsn env unset", base + "review: {store: postgres}\n", `review.dsn_env: environment variable CONTRACTD_REVIEW_DSN is not set`},
		{"dsn_env with sqlite", base + "review: {dsn_env: X}\n", `review.dsn_env: dsn_env is only used with store: postgres`},
		{"dsn not a dsn", base + "review: {store: postgres, dsn_env: CONTRACTD_TEST_SECRET}\n", `review.dsn_env: environment variable CONTRACTD_TEST_SECRET does not hold a PostgreSQL DSN (postgres://… or key=value pairs)`},
		{"dsn of another scheme", base + "review: {store: postgres, dsn_env: CONTRACTD_TEST_MYSQL}\n", `review.dsn_env: environment variable CONTRACTD_TEST_MYSQL does not hold a PostgreSQL DSN`},
		{"path with postgres", base + "review: {store: postgres, dsn_env: CONTRACTD_TEST_SECRET, path: x.db}\n", `review.path: path is only used with store: sqlite`},
		{"unset webhook secret", base + "review: {webhook: {url: \"http://127.0.0.1:1/h\", secret_env: NOPE_SECRET_UNSET}}\n", `review.webhook.secret_env: environment variable NOPE_SECRET_UNSET is not set`},
		{"webhook without secret", base + "review: {webhook: {url: \"http://127.0.0.1:1/h\"}}\n", `review.webhook.secret_env: webhook needs secret_env`},
		{"webhook bad url", base + "review: {webhook: {url: \"ftp://x\", secret_env: CONTRACTD_TEST_SECRET}}\n", `review.webhook.url: "ftp://x" is not an http(s) URL`},
		{"webhook without url", base + "review: {webhook: {secret_env: CONTRACTD_TEST_SECRET}}\n", `review.webhook.url: webhook needs a url`},
		{"webhook url with credentials", base + "review: {webhook: {url: \"https://u:pw-not-echoed@h.example/x\", secret_env: CONTRACTD_TEST_SECRET}}\n", `review.webhook.url: url must not carry credentials`},
		{"webhook other scheme with credentials", base + "review: {webhook: {url: \"ftp://u:pw-not-echoed@h.example/x\", secret_env: CONTRACTD_TEST_SECRET}}\n", `review.webhook.url: "ftp://u:xxxxx@h.example/x" is not an http(s) URL`},
		{"webhook url unparsable", base + "review: {webhook: {url: \"http://u:pw-not-echoed@h.example:port/x\", secret_env: CONTRACTD_TEST_SECRET}}\n", `review.webhook.url: not a URL`},
		{"webhook url without host", base + "review: {webhook: {url: \"https:///x\", secret_env: CONTRACTD_TEST_SECRET}}\n", `review.webhook.url: "https:///x" is not an http(s) URL`},
		{"store none with path", base + "review: {store: none, path: r.db}\n", `review.store: store none keeps nothing: remove path and dsn_env`},
		{"negative retention", base + "review: {retention: -1h}\n", `review.retention: invalid duration "-1h"`},
		{"webhook needs a store", base + "review: {store: none, webhook: {url: \"http://127.0.0.1:1/h\", secret_env: CONTRACTD_TEST_SECRET}}\n", `review.webhook: webhook needs a store`},
		{"admin_keys_env bad name", "server: {admin_keys_env: \"not a name\"}\n" + base, `server.admin_keys_env: "not a name" is not an environment variable name`},
		{"admin_keys_env unset", "server: {admin_keys_env: NOPE_ADMIN_UNSET}\n" + base, `server.admin_keys_env: environment variable NOPE_ADMIN_UNSET is not set`},
		{"admin_keys_env holds no key", "server: {admin_keys_env: CONTRACTD_TEST_BLANK_KEYS}\n" + base, `server.admin_keys_env: environment variable CONTRACTD_TEST_BLANK_KEYS holds no key`},
		// Set to separators only ("${K1},${K2}" with both unset): no
		// key, and serve would open the API to everyone.
		{"api_keys_env holds no key", "server: {api_keys_env: CONTRACTD_TEST_BLANK_KEYS}\n" + base, `server.api_keys_env: environment variable CONTRACTD_TEST_BLANK_KEYS holds no key`},
		{"unknown server key", "server: {admin_keys: X}\n" + base, `server.admin_keys: unknown key "admin_keys"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yaml, map[string]string{"CONTRACTD_TEST_SECRET": "s", "CONTRACTD_TEST_MYSQL": "mysql://u:pw@h/db", "CONTRACTD_TEST_BLANK_KEYS": " , "})
			wantNoSecret(t, got, "pw-not-echoed")
			wantProblem(t, got, tt.want)
		})
	}
}

func TestReviewLineNumbers(t *testing.T) {
	_, err := LoadBytes("c.yaml", []byte(base+"review:\n  store: sqlite\n  retention: 3 days\n"))
	if err == nil || !strings.Contains(err.Error(), "c.yaml:12: review.retention: invalid duration") {
		t.Fatalf("got %v", err)
	}
}

func TestReviewDefaults(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "schemas", "ok.json"), []byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`), 0o644)
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte(base), 0o644)
	rt, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r := rt.Review
	if r.Store != "sqlite" || r.Path != filepath.Join(dir, "reviews.db") || r.Retention != 720*time.Hour ||
		r.SpoolPath != filepath.Join(dir, "review-spool.jsonl") || r.Webhook != nil || r.DedupeWindow != 60*time.Second {
		t.Fatalf("%+v", r)
	}
	for yaml, want := range map[string]time.Duration{"review: {dedupe_window: 0}\n": 0, "review: {dedupe_window: 5m}\n": 5 * time.Minute} {
		os.WriteFile(p, []byte(base+yaml), 0o644)
		if rt, err := Load(p); err != nil || rt.Review.DedupeWindow != want {
			t.Fatalf("%q: %v %+v", yaml, err, rt)
		}
	}
	t.Setenv("PG_DSN_TEST", "postgres://x")
	t.Setenv("HOOK_SECRET_TEST", "s")
	t.Setenv("ADMINS", "k")
	os.WriteFile(p, []byte(base+"server: {admin_keys_env: ADMINS}\nreview: {store: postgres, dsn_env: PG_DSN_TEST, retention: 1h, webhook: {url: \"https://h.example/x\", secret_env: HOOK_SECRET_TEST}}\n"), 0o644)
	rt, err = Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r = rt.Review
	if r.Store != "postgres" || r.DSNEnv != "PG_DSN_TEST" || r.Retention != time.Hour || r.SpoolPath != filepath.Join(dir, "review-spool.jsonl") ||
		r.Webhook == nil || r.Webhook.URL != "https://h.example/x" || rt.Server.AdminKeysEnv != "ADMINS" {
		t.Fatalf("%+v %+v", r, rt.Server)
	}
}

// Both DSN forms pass validation, and a bad one is named without its value
// (it holds the password).
func TestReviewDSNForms(t *testing.T) {
	for _, dsn := range []string{"postgres://u:pw@db:5432/c?sslmode=verify-full", "postgresql:///c?host=/run/pg", "host=db user=u password=pw dbname=c"} {
		got := problemsOf(t, base+"review: {store: postgres, dsn_env: PG_FORM_TEST}\n", map[string]string{"PG_FORM_TEST": dsn})
		for _, g := range got {
			if strings.Contains(g, "dsn_env") {
				t.Errorf("%s: %s", dsn, g)
			}
		}
	}
	got := problemsOf(t, base+"review: {store: postgres, dsn_env: PG_FORM_TEST}\n", map[string]string{"PG_FORM_TEST": "mysql://u:s3cretpw@h/db"})
	if strings.Contains(strings.Join(got, "\n"), "s3cretpw") {
		t.Errorf("problem quotes the DSN: %v", got)
	}
}
