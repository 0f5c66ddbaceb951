package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConfigDocsDefaults: the default docs/config.md's tables give for a
// key is the value a config that leaves the key out runs with. The keys'
// names are held to the structs by TestConfigDocs; this holds the second
// column to Compile, so a default changed in the code (or a doc edited by
// hand) fails here instead of misleading an operator who sizes a
// deployment by the table. Each default is read from the Runtime of a
// config that sets nothing optional, not from the Default* constants: a
// constant the compiler stopped applying would pass.
func TestConfigDocsDefaults(t *testing.T) {
	doc := readConfigDoc(t)
	t.Setenv("OPENAI_API_KEY", "k")
	t.Setenv("CONTRACTD_REDIS_URL", "redis://127.0.0.1:6379/0")
	t.Setenv("CONTRACTD_REVIEW_DSN", "postgres://u@127.0.0.1:5432/db")
	const base = `
upstreams:
  - {name: up, base_url: http://127.0.0.1:1/v1, api_key_env: OPENAI_API_KEY}
prompts:
  - {name: p, system: "Reply with JSON."}
contracts:
  - {name: c, schema: {type: object}}
routes:
  - {name: r, upstream: up, model: m, prompt: p, contract: c, temperature: 0.5}
`
	dir := t.TempDir()
	load := func(extra string) *Runtime {
		t.Helper()
		rt, err := LoadBytes(filepath.Join(dir, "contractd.yaml"), []byte(extra+base))
		if err != nil {
			t.Fatalf("the defaults config does not load:\n%v", err)
		}
		return rt
	}
	rt := load("server: {rate_limit: {requests_per_second: 1}}\n")
	redis := load("server: {rate_limit: {requests_per_second: 1, store: redis}}\n")
	pg := load("review: {store: postgres}\n")
	route, up, contract := rt.Routes["r"], rt.Upstreams["up"], rt.Contracts["c"]

	memLimit := "off"
	switch {
	case rt.Server.MemoryLimit.Auto:
		memLimit = "auto"
	case rt.Server.MemoryLimit.Bytes > 0:
		memLimit = strconv.FormatInt(rt.Server.MemoryLimit.Bytes, 10)
	}
	for _, c := range []struct {
		heading, key string
		got          any // the Runtime's value: string, int, int64, bool or time.Duration
	}{
		{"## `server`", "listen", rt.Server.Listen},
		{"## `server`", "admin_listen", rt.Server.AdminListen},
		{"## `server`", "max_body_bytes", rt.Server.MaxBodyBytes},
		{"## `server`", "request_timeout", rt.Server.RequestTimeout},
		{"## `server`", "shutdown_timeout", rt.Server.ShutdownTimeout},
		{"## `server`", "log_level", strings.ToLower(rt.Server.LogLevel.String())},
		{"## `server`", "max_connections", rt.Server.MaxConnections},
		{"## `server`", "max_inflight_bytes", rt.Server.MaxInflightBytes},
		{"## `server`", "body_read_timeout", rt.Server.BodyReadTimeout},
		{"## `server`", "memory_limit", memLimit},
		// Not burst: its 1 is what the limiter makes of an unset 0 (proxy).
		{"### `server.rate_limit`", "store", string(rt.Server.RateLimit.Store)},
		{"### `server.rate_limit`", "redis_url_env", redis.Server.RateLimit.RedisURLEnv},
		{"### `server.rate_limit`", "timeout", redis.Server.RateLimit.Timeout},
		{"## `audit`", "sink", string(rt.Audit.Sink)},
		{"## `audit`", "include_content", rt.Audit.IncludeContent},
		{"## `review`", "store", string(rt.Review.Store)},
		{"## `review`", "path", filepath.Base(rt.Review.Path)},
		{"## `review`", "dsn_env", pg.Review.DSNEnv},
		{"## `review`", "retention", rt.Review.Retention},
		{"## `review`", "dedupe_window", rt.Review.DedupeWindow},
		{"## `upstreams[]`", "timeout", up.Timeout},
		{"## `upstreams[]`", "max_retries", up.MaxRetries},
		{"## `upstreams[]`", "max_tokens_param", string(up.MaxTokensParam)},
		{"## `upstreams[]`", "max_concurrency", up.MaxConcurrency},
		{"## `contracts[]`", "extraction", string(contract.Mode)},
		{"## `contracts[]`", "max_output_bytes", contract.Limits.MaxBytes},
		{"## `routes[]`", "passthrough", route.Passthrough},
		{"## `routes[]`", "max_output_tokens", route.MaxOutputTokens},
		{"## `routes[]`", "response_format", string(route.ResponseFormat)},
		{"## `routes[]`", "client_system", string(route.ClientSystem)},
	} {
		cell, ok := defaultCell(t, doc, c.heading, c.key)
		if !ok {
			t.Errorf("docs/config.md has no row for `%s` under %s", c.key, c.heading)
			continue
		}
		if err := sameDefault(cell, c.got); err != nil {
			t.Errorf("docs/config.md %s `%s`: default %q, but a config without it runs with %v: %v", c.heading, c.key, cell, c.got, err)
		}
	}
	// The default plan, written in the retry row as YAML with the route's
	// temperature as T.
	plan := route.Plan
	if len(plan) != 2 || plan[0].Temperature != route.Temperature || plan[0].Shorten != nil || plan[1].Shorten == nil {
		t.Fatalf("a route without retry compiles to the plan %+v; the test reads two attempts, the second shortened", plan)
	}
	want := fmt.Sprintf("`[{temperature: T}, {temperature: %v, shorten: {ratio: %v, keep: %s}}]`",
		plan[1].Temperature, plan[1].Shorten.Ratio, plan[1].Shorten.Keep)
	if cell, _ := defaultCell(t, doc, "## `routes[]`", "retry"); !strings.Contains(rowOf(t, doc, "## `routes[]`", "retry"), want) {
		t.Errorf("docs/config.md's retry row (default %q) does not give the default plan as %s", cell, want)
	}
}

// readConfigDoc is docs/config.md.
func readConfigDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// defaultCell is the first code span of the default column of key's row
// under heading ("`120s`", "`0` (none)", "`\"\"`"), without its backticks.
func defaultCell(t *testing.T, doc, heading, key string) (string, bool) {
	t.Helper()
	for _, row := range tableRows(t, doc, heading) {
		cells := strings.Split(row, "|")
		if len(cells) < 4 || strings.TrimSpace(cells[1]) != "`"+key+"`" {
			continue
		}
		m := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(cells[2])
		if m == nil {
			return strings.TrimSpace(cells[2]), true
		}
		return m[1], true
	}
	return "", false
}

// rowOf is key's row under heading.
func rowOf(t *testing.T, doc, heading, key string) string {
	t.Helper()
	for _, row := range tableRows(t, doc, heading) {
		if cells := strings.Split(row, "|"); len(cells) > 2 && strings.TrimSpace(cells[1]) == "`"+key+"`" {
			return row
		}
	}
	return ""
}

// sameDefault: the doc's default, read as got's type, is got.
func sameDefault(cell string, got any) error {
	switch g := got.(type) {
	case string:
		if cell == `""` {
			cell = ""
		}
		if cell != g {
			return fmt.Errorf("not %q", g)
		}
	case time.Duration:
		d, err := time.ParseDuration(cell)
		if err != nil || d != g {
			return fmt.Errorf("not the duration %v", g)
		}
	case int, int64:
		n, err := strconv.ParseInt(cell, 10, 64)
		if err != nil || fmt.Sprint(n) != fmt.Sprint(g) {
			return fmt.Errorf("not the number %v", g)
		}
	case bool:
		b, err := strconv.ParseBool(cell)
		if err != nil || b != g {
			return fmt.Errorf("not %v", g)
		}
	default:
		return fmt.Errorf("no comparison for %T", got)
	}
	return nil
}
