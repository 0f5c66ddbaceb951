package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/clients.md quotes the client snippets the end-to-end tests run (the
// node suite's, and go-openai's e2e/goclient); each quoted block must be its
// file, byte for byte, so the page cannot rot.
func TestClientDocsQuoteTheTestedSnippets(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- snippet: (\\S+) -->\n```(?:js|go)\n(.*?)```\n<!-- /snippet -->")
	blocks := re.FindAllSubmatch(doc, -1)
	seen := map[string]bool{}
	for _, b := range blocks {
		path := string(b[1])
		want, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if string(b[2]) != string(want) {
			t.Errorf("docs/clients.md's copy of %s differs from the file", path)
		}
		seen[filepath.Base(path)] = true
	}
	files, _ := filepath.Glob(filepath.Join("node", "snippets", "*.mjs"))
	goFiles, _ := filepath.Glob(filepath.Join("goclient", "*.go"))
	for _, f := range goFiles {
		if !strings.HasSuffix(f, "_test.go") {
			files = append(files, f)
		}
	}
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s is not quoted in docs/clients.md", f)
		}
	}
	if len(files) == 0 || len(blocks) != len(files) {
		t.Errorf("%d snippet files, %d quoted blocks", len(files), len(blocks))
	}
}
