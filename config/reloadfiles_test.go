package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestErrorNamesFiles: a config that does not compile still says which
// files it names (the config and every schema_file, the unreadable one
// included), so serve can watch them after refusing it; one whose YAML
// does not decode names none.
func TestErrorNamesFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "contractd.yaml")
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(`contracts:
  - {name: a, schema_file: a.json}
  - {name: b, schema_file: schemas/b.json}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOffline(cfg)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err %v, want *Error", err)
	}
	want := []string{cfg, filepath.Join(dir, "a.json"), filepath.Join(dir, "schemas", "b.json")}
	if !slices.Equal(ce.Files, want) {
		t.Fatalf("Files %q, want %q", ce.Files, want)
	}
	if err := os.WriteFile(cfg, []byte("contracts: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOffline(cfg); !errors.As(err, &ce) || ce.Files != nil {
		t.Fatalf("YAML that does not decode: %v, Files %q", err, ce.Files)
	}
}

// TestRuntimeSHA256CoversSchemaFiles: the hash `config reloaded` logs is
// of what was loaded, so a reload caused by a schema file alone shows a
// new one (it was of the config's bytes only, the same after such a
// reload); the same files give the same hash.
func TestRuntimeSHA256CoversSchemaFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "contractd.yaml")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const ab = "contracts:\n  - {name: a, schema_file: a.json}\n  - {name: b, schema_file: b.json}\n"
	load := func() string {
		t.Helper()
		rt, err := LoadOffline(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(rt.SHA256) != 64 {
			t.Fatalf("SHA256 %q, want 64 hex digits", rt.SHA256)
		}
		return rt.SHA256
	}
	write("a.json", `{"type":"object"}`)
	write("b.json", `{"type":"object"}`)
	write("contractd.yaml", ab)
	base := load()
	if again := load(); again != base {
		t.Fatalf("same files: %s then %s", base, again)
	}
	steps := []struct {
		name   string
		do     func()
		differ bool // from base
	}{
		{"a schema file changed", func() { write("a.json", `{"type":"object","required":["x"]}`) }, true},
		{"schema file back as it was", func() { write("a.json", `{"type":"object"}`) }, false},
		{"config changed", func() { write("contractd.yaml", ab+"# a comment\n") }, true},
		{"config back", func() { write("contractd.yaml", ab) }, false},
	}
	for _, s := range steps {
		s.do()
		if got := load(); (got != base) != s.differ {
			t.Errorf("%s: hash %s, base %s; want differ=%v", s.name, got, base, s.differ)
		}
	}
}

// TestLoadedSHAFileBoundaries: each file's bytes are length-prefixed, so
// bytes moved from one file to the next change the hash; the files are
// hashed in the order of their paths, not the map's.
func TestLoadedSHAFileBoundaries(t *testing.T) {
	many := map[string][]byte{"/a": []byte("1"), "/b": []byte("2"), "/c": []byte("3"), "/d": []byte("4"), "/e": []byte("5")}
	first := loadedSHA([]byte("c"), many)
	for range 20 {
		if got := loadedSHA([]byte("c"), many); got != first {
			t.Fatalf("same files: %s then %s", first, got)
		}
	}
	for _, tt := range []struct {
		name           string
		rawA, rawB     string
		filesA, filesB map[string][]byte
	}{
		{"between schema files", "c", "c", map[string][]byte{"/a": []byte("{}{}"), "/b": nil}, map[string][]byte{"/a": []byte("{}"), "/b": []byte("{}")}},
		{"config to schema", "c{}", "c", map[string][]byte{"/a": nil}, map[string][]byte{"/a": []byte("{}")}},
	} {
		if loadedSHA([]byte(tt.rawA), tt.filesA) == loadedSHA([]byte(tt.rawB), tt.filesB) {
			t.Errorf("%s: same hash", tt.name)
		}
	}
}
