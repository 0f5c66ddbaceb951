package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
)

// TestReadmeConfigLoads: the README's minimal config, copied into an empty
// directory as contractd.yaml, loads as `contractd validate` and `serve`
// load it (every reference, schema, template and policy checked), with the
// variables it names set. It named a schema_file the reader does not have
// (contracts/classify.schema.json), so the first thing a new user ran
// failed with "cannot read contracts/classify.schema.json".
func TestReadmeConfigLoads(t *testing.T) {
	block := testkit.DocBlock(t, "README.md", "## Configuration", "yaml")
	t.Setenv("CONTRACTD_API_KEYS", "k1")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	p := filepath.Join(t.TempDir(), "contractd.yaml")
	if err := os.WriteFile(p, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := config.Load(p)
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
