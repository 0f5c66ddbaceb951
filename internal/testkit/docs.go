package testkit

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DocSection is the text under the first line of the module's file rel (a
// path from the module root: "README.md", "docs/deploy.md") that starts
// with heading ("## Metrics"), up to the next "## " heading. A missing
// file or heading fails the test: a test of what a page says must not
// pass because the page or its section was renamed.
func DocSection(t testing.TB, rel, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ModuleRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	doc := "\n" + string(b)
	i := strings.Index(doc, "\n"+heading)
	if i < 0 {
		t.Fatalf("%s has no heading %q", rel, heading)
	}
	_, sec, _ := strings.Cut(doc[i+1:], "\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	return sec
}

// DocBlock is the first fenced block in lang ("```yaml") of
// DocSection(t, rel, heading), without its fences.
func DocBlock(t testing.TB, rel, heading, lang string) string {
	t.Helper()
	_, block, ok := strings.Cut(DocSection(t, rel, heading), "```"+lang+"\n")
	if !ok {
		t.Fatalf("%s's %q section has no ```%s block", rel, heading, lang)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// RepoFiles is every file of the module's tree, as slash-separated paths
// from the module root, but for what lies under a .git, node_modules, bin
// or testdata directory: the sources, scripts and pages a test of the
// whole repository reads.
func RepoFiles(t testing.TB) []string {
	t.Helper()
	root := ModuleRoot(t)
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "bin", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
