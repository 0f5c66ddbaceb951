package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRateLimitProblems(t *testing.T) {
	env := map[string]string{"RL_REDIS_TEST": "redis://:pw-not-echoed@127.0.0.1:6379/0", "RL_BAD_URL_TEST": "http://pw-not-echoed@h/"}
	tests := []struct {
		name, yaml string
		want       string // "" : valid
	}{
		{"memory default", "server: {rate_limit: {requests_per_second: 5, burst: 10}}\n", ""},
		{"memory explicit", "server: {rate_limit: {requests_per_second: 5, store: memory}}\n", ""},
		{"redis", "server: {rate_limit: {requests_per_second: 5, store: redis, redis_url_env: RL_REDIS_TEST}}\n", ""},
		{"unknown store", "server: {rate_limit: {requests_per_second: 5, store: memcached}}\n", `server.rate_limit.store: unknown store "memcached" (memory, redis)`},
		{"unknown key", "server: {rate_limit: {requests_per_second: 5, redis_url: x}}\n", `server.rate_limit.redis_url: unknown key "redis_url"`},
		{"url env with memory", "server: {rate_limit: {requests_per_second: 5, redis_url_env: RL_REDIS_TEST}}\n", `server.rate_limit.redis_url_env: redis_url_env is only used with store: redis`},
		{"url env unset", "server: {rate_limit: {requests_per_second: 5, store: redis, redis_url_env: NOPE_REDIS_UNSET}}\n", `server.rate_limit.redis_url_env: environment variable NOPE_REDIS_UNSET is not set`},
		{"default url env unset", "server: {rate_limit: {requests_per_second: 5, store: redis}}\n", `server.rate_limit.redis_url_env: environment variable CONTRACTD_REDIS_URL is not set`},
		{"url env bad name", "server: {rate_limit: {requests_per_second: 5, store: redis, redis_url_env: \"a b\"}}\n", `server.rate_limit.redis_url_env: "a b" is not an environment variable name`},
		{"not a redis url", "server: {rate_limit: {requests_per_second: 5, store: redis, redis_url_env: RL_BAD_URL_TEST}}\n", `server.rate_limit.redis_url_env: environment variable RL_BAD_URL_TEST does not hold a redis://, rediss:// or unix:// URL`},
		{"redis timeout", "server: {rate_limit: {requests_per_second: 5, store: redis, redis_url_env: RL_REDIS_TEST, timeout: 250ms}}\n", ""},
		{"timeout with memory", "server: {rate_limit: {requests_per_second: 5, timeout: 1s}}\n", `server.rate_limit.timeout: timeout is only used with store: redis`},
		{"bad timeout", "server: {rate_limit: {requests_per_second: 5, store: redis, redis_url_env: RL_REDIS_TEST, timeout: soon}}\n", `server.rate_limit.timeout: invalid duration "soon"`},
		{"rate zero", "server: {rate_limit: {requests_per_second: 0, store: redis, redis_url_env: RL_REDIS_TEST}}\n", `server.rate_limit: requests_per_second must be positive`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, "routes: []\n"+tt.yaml+base, env)
			if tt.want == "" {
				if len(got) > 0 {
					t.Fatalf("valid config refused:\n  %s", strings.Join(got, "\n  "))
				}
				return
			}
			wantNoSecret(t, got, "pw-not-echoed")
			wantProblem(t, got, tt.want)
		})
	}
}

func TestRateLimitLineNumbers(t *testing.T) {
	_, err := LoadBytes("c.yaml", []byte(base+"server:\n  rate_limit:\n    requests_per_second: 5\n    store: redis-cluster\n"))
	if err == nil || !strings.Contains(err.Error(), `c.yaml:13: server.rate_limit.store: unknown store "redis-cluster"`) {
		t.Fatalf("got %v", err)
	}
}

func TestRateLimitDefaults(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "schemas", "ok.json"), []byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`), 0o644)
	t.Setenv(DefaultRedisURLEnv, "redis://127.0.0.1:1/0")
	for _, tt := range []struct {
		yaml    string
		store   RateLimitStore
		env     string
		timeout time.Duration
	}{
		{"server: {rate_limit: {requests_per_second: 5}}\n", "memory", "", 0},
		{"server: {rate_limit: {requests_per_second: 5, store: redis}}\n", "redis", DefaultRedisURLEnv, 100 * time.Millisecond},
		{"server: {rate_limit: {requests_per_second: 5, store: redis, timeout: 2s}}\n", "redis", DefaultRedisURLEnv, 2 * time.Second},
	} {
		p := filepath.Join(dir, "c.yaml")
		os.WriteFile(p, []byte(base+tt.yaml), 0o644)
		rt, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		rl := rt.Server.RateLimit
		if rl == nil || rl.Store != tt.store || rl.RedisURLEnv != tt.env || rl.RequestsPerSecond != 5 || rl.Timeout != tt.timeout {
			t.Errorf("%s: got %+v", tt.yaml, rl)
		}
	}
	os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(base), 0o644)
	if rt, err := Load(filepath.Join(dir, "c.yaml")); err != nil || rt.Server.RateLimit != nil {
		t.Errorf("no rate_limit: %v %+v", err, rt)
	}
}
