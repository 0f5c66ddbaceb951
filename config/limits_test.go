package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLimitsProblems(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"negative connections", "server: {max_connections: -1}\n", "server.max_connections: must be positive"},
		{"connections not a number", "server: {max_connections: many}\n", `server.max_connections: must be an integer, not "many"`},
		{"negative inflight", "server: {max_inflight_bytes: -5}\n", "server.max_inflight_bytes: must be positive"},
		{"inflight below body", "server: {max_body_bytes: 2048, max_inflight_bytes: 1024}\n", "server.max_inflight_bytes: must be at least max_body_bytes (2048)"},
		{"bad body timeout", "server: {body_read_timeout: slow}\n", `server.body_read_timeout: invalid duration "slow"`},
		{"bad memory limit", "server: {memory_limit: lots}\n", `server.memory_limit: "lots" is not auto, off or a size such as 512MiB`},
		{"bad memory unit", "server: {memory_limit: 5XB}\n", `server.memory_limit: "5XB" is not auto, off`},
		{"tiny memory limit", "server: {memory_limit: 1MiB}\n", `server.memory_limit: "1MiB" is below 16MiB`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yaml+base, nil)
			wantProblem(t, got, tt.want)
		})
	}
}

func TestLimitsLineNumbers(t *testing.T) {
	_, err := LoadBytes("c.yaml", []byte("server:\n  listen: 127.0.0.1:1\n  memory_limit: huge\n"+base))
	if err == nil || !strings.Contains(err.Error(), `c.yaml:3: server.memory_limit: "huge" is not auto`) {
		t.Fatalf("got %v", err)
	}
}

// loadIn loads yaml from a temp dir holding the schema base refers to.
func loadIn(t *testing.T, yaml string) (*Runtime, error) {
	t.Helper()
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "schemas", "ok.json"), []byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`), 0o644)
	p := filepath.Join(dir, "c.yaml")
	_ = os.WriteFile(p, []byte(yaml), 0o644)
	return Load(p)
}

func TestLimitsDefaultsAndValues(t *testing.T) {
	rt, err := loadIn(t, base)
	if err != nil {
		t.Fatal(err)
	}
	s := rt.Server
	if s.MaxConnections != 4096 || s.MaxInflightBytes != 268435456 || s.BodyReadTimeout != 30*time.Second || s.MemoryLimit != (MemoryLimit{Auto: true}) {
		t.Fatalf("defaults %+v", s)
	}
	rt, err = loadIn(t, ("server: {max_connections: 10, max_inflight_bytes: 8388608, body_read_timeout: 5s, memory_limit: 512MiB}\n" + base))
	if err != nil {
		t.Fatal(err)
	}
	s = rt.Server
	if s.MaxConnections != 10 || s.MaxInflightBytes != 8<<20 || s.BodyReadTimeout != 5*time.Second || s.MemoryLimit != (MemoryLimit{Bytes: 512 << 20}) {
		t.Fatalf("values %+v", s)
	}
	// body_read_timeout is part of request_timeout: never longer (warned).
	rt, err = loadIn(t, ("server: {request_timeout: 2s, body_read_timeout: 5s, memory_limit: \"off\"}\n" + base))
	if err != nil {
		t.Fatal(err)
	}
	if rt.Server.BodyReadTimeout != 2*time.Second || rt.Server.MemoryLimit != (MemoryLimit{}) {
		t.Fatalf("%+v", rt.Server)
	}
	warned := false
	for _, w := range rt.Warnings {
		warned = warned || strings.Contains(w.String(), "server.body_read_timeout: longer than request_timeout")
	}
	if !warned {
		t.Errorf("no warning: %v", rt.Warnings)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512MiB": 512 << 20, "2GiB": 2 << 30, "1.5 GiB": 3 << 29, "300MB": 300e6, "64kib": 64 << 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "0", "MiB", "5 parsecs", "1e3", "99999999999TiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// FuzzParseMemoryLimit: any memory_limit text is auto, off, a size of at
// least 16 MiB, or an error; a size prints back to the same bytes.
func FuzzParseMemoryLimit(f *testing.F) {
	for _, s := range []string{"auto", "off", "", "512MiB", "1.5 GiB", "300MB", "1048576", "-1", "1e9", "9999999999999TiB", "16MiB", "0.1KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ml, err := ParseMemoryLimit(s)
		if err != nil {
			return
		}
		if ml.Auto && ml.Bytes != 0 || !ml.Auto && ml.Bytes != 0 && ml.Bytes < 16<<20 || ml.Bytes < 0 {
			t.Fatalf("%q: %+v", s, ml)
		}
		if !ml.Auto && ml.Bytes > 0 {
			if n, err := ParseSize(strconv.FormatInt(ml.Bytes, 10)); err != nil || n != ml.Bytes {
				t.Fatalf("%q: %d does not read back (%d, %v)", s, ml.Bytes, n, err)
			}
		}
	})
}
