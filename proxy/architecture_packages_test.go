package proxy

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// TestArchitectureListsEveryPackage: docs/architecture.md's "Where things
// live" table names every package directory of the repository (every
// directory holding Go files, deploy/'s and e2e/openaigo's modules
// included), and names no directory that is not there. The table had
// fallen behind: eight internal packages, review/storetest, the soak
// suites and the two SDK test packages were in no row.
func TestArchitectureListsEveryPackage(t *testing.T) {
	doc := readDoc(t, "docs/architecture.md")
	_, sec, ok := strings.Cut(doc, "\n## Where things live\n")
	if !ok {
		t.Fatal("docs/architecture.md has no ## Where things live section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	listed := map[string]bool{}
	for _, l := range strings.Split(sec, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 3 || !strings.Contains(cells[1], "`") {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z0-9/_-]+)`").FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	if len(listed) == 0 {
		t.Fatal("no package rows in docs/architecture.md's table")
	}
	pkgs := map[string]bool{}
	for _, p := range testkit.RepoFiles(t) {
		if strings.HasSuffix(p, ".go") {
			pkgs[path.Dir(p)] = true
		}
	}
	for p := range pkgs {
		if !listed[p] {
			t.Errorf("package directory %s is in no row of docs/architecture.md's \"Where things live\" table", p)
		}
	}
	for p := range listed {
		if !pkgs[p] {
			if _, err := os.Stat(filepath.Join("..", p)); err != nil {
				t.Errorf("docs/architecture.md's table names %s, which is not a directory of the repository", p)
			} else {
				t.Errorf("docs/architecture.md's table names %s, which holds no Go package", p)
			}
		}
	}
}
