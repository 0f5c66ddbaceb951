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
