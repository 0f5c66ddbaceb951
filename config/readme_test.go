package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeConfigLoads: the README's minimal config, copied into an empty
// directory as contractd.yaml, loads as `contractd validate` and `serve`
// load it (every reference, schema, template and policy checked), with the
// variables it names set. It named a schema_file the reader does not have
// (contracts/classify.schema.json), so the first thing a new user ran
// failed with "cannot read contracts/classify.schema.json".
func TestReadmeConfigLoads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no Configuration section")
	}
	_, block, ok := strings.Cut(sec, "```yaml\n")
	if !ok {
		t.Fatal("README.md's Configuration section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	t.Setenv("CONTRACTD_API_KEYS", "k1")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	p := filepath.Join(t.TempDir(), "contractd.yaml")
	if err := os.WriteFile(p, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := Load(p)
	if err != nil {
		t.Fatalf("the README's config does not load:\n%v", err)
	}
	if len(rt.Warnings) != 0 {
		t.Errorf("the README's config loads with warnings: %q", rt.Warnings)
	}
	if rt.Routes["classify-email"] == nil || rt.Routes["raw-chat"] == nil {
		t.Errorf("routes %v, want classify-email and raw-chat", rt.Routes)
	}
}
