package testkit

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/config"
)

// LoadRuntime compiles yaml as if read from path (relative schema_file
// entries resolve against path's directory) and fails the test, showing
// the YAML, when it does not compile.
func LoadRuntime(t testing.TB, path, yaml string) *config.Runtime {
	t.Helper()
	rt, err := config.LoadBytes(path, []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return rt
}

// Or is v, or def when v is the zero value (a config knob's default).
func Or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// SetHeaders applies "Name: value" pairs to h; "Name:" with no value
// removes the header.
func SetHeaders(h http.Header, kv ...string) {
	for _, s := range kv {
		k, v, _ := strings.Cut(s, ":")
		if v = strings.TrimSpace(v); v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
	}
}

// ClassifyPrompt is the e-mail classifier prompt of the test configs
// (testdata/prompts/classify.yaml at the module root), one entry of a
// prompts: list, with role as its system prompt's first sentence. It
// panics when the file cannot be read: every harness needs it.
func ClassifyPrompt(role string) string {
	root, err := moduleRoot()
	if err != nil {
		panic(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "prompts", "classify.yaml"))
	if err != nil {
		panic(err)
	}
	var entry strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			entry.WriteString(line)
		}
	}
	return strings.ReplaceAll(entry.String(), "@ROLE@", role)
}
