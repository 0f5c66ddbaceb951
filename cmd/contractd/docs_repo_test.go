package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// pageCode is a page's code: its fenced blocks and inline code spans.
func pageCode(page string) []string {
	var code []string
	for i, part := range strings.Split(page, "```") {
		if i%2 == 1 {
			code = append(code, part)
			continue
		}
		for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(part, -1) {
			code = append(code, m[1])
		}
	}
	return code
}

// TestDocsMakeTargets: every `make TARGET` the README and docs write in
// their code is a target of the Makefile, and the README's quickstart is
// the two commands the developers' guide promises a fresh machine
// (`make demo`, `make test`).
func TestDocsMakeTargets(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	makeCmd := regexp.MustCompile(`(?:^|[\s(;&|])make ([a-z][a-z0-9-]*)`)
	seen := 0
	for name, page := range docPages(t) {
		for _, c := range pageCode(page) {
			for _, m := range makeCmd.FindAllStringSubmatch(c, -1) {
				seen++
				if !targets[m[1]] {
					t.Errorf("%s: `make %s`: the Makefile has no target %q", name, m[1], m[1])
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found %d make commands in the docs; the pattern no longer reads them", seen)
	}
	readme := docPages(t)["README.md"]
	_, quick, _ := strings.Cut(readme, "\n## Quickstart\n")
	quick, _, _ = strings.Cut(quick, "\n## ")
	_, block, _ := strings.Cut(quick, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if want := []string{"make demo", "make test"}; !slices.Equal(cmds, want) {
		t.Errorf("the README's quickstart runs %q, want %q", cmds, want)
	}
}

// TestDocsLinks: every relative link of the README, docs/*.md and the
// examples' READMEs names a file of the repository, and a #fragment names
// a heading of the page it points into (GitHub's anchors: lower case,
// punctuation dropped, spaces as hyphens). docs/replay.md linked
// benchmarks.md#replay after the heading became "Replay (issue 13)".
func TestDocsLinks(t *testing.T) {
	pages := docPages(t)
	for _, p := range []string{"examples/README.md"} {
		b, err := os.ReadFile(filepath.Join("../..", p))
		if err != nil {
			t.Fatal(err)
		}
		pages[p] = string(b)
	}
	readmes, _ := filepath.Glob("../../examples/*/README.md")
	for _, p := range readmes {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pages[strings.TrimPrefix(p, "../../")] = string(b)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for name, page := range pages {
		prose := stripFences(page)
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			file := name
			if path != "" {
				file = filepath.Join(filepath.Dir(name), path)
			}
			if _, err := os.Stat(filepath.Join("../..", file)); err != nil {
				t.Errorf("%s: link %s: %s is not in the repository", name, target, file)
				continue
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			b, err := os.ReadFile(filepath.Join("../..", file))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(headingAnchors(string(b)), frag) {
				t.Errorf("%s: link %s: %s has no heading whose anchor is #%s", name, target, file, frag)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links; the pattern no longer reads them", checked)
	}
}

// stripFences is a page without its fenced code blocks.
func stripFences(page string) string {
	var out strings.Builder
	for i, part := range strings.Split(page, "```") {
		if i%2 == 0 {
			out.WriteString(part)
		}
	}
	return out.String()
}

// headingAnchors are the anchors GitHub gives a page's headings.
func headingAnchors(page string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllStringSubmatch(stripFences(page), -1) {
		h := strings.ToLower(strings.TrimSpace(m[1]))
		h = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`).ReplaceAllString(h, "")
		out = append(out, strings.ReplaceAll(h, " ", "-"))
	}
	return out
}

// TestDocsNameTests: every test, benchmark and fuzz target the README and
// docs name (TestReplayExample, BenchmarkReviewPathPaced/needs_review,
// `TestUpstream*` for a family) is declared in a _test.go file of the
// repository, so a reader told which test checks a claim can run it.
// docs/benchmarks.md named TestUpstreamBodyRedirect, merged into
// TestUpstreamBodyReadTwice.
func TestDocsNameTests(t *testing.T) {
	declared := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]+)\(`)
	root := testkit.ModuleRoot(t)
	for _, p := range testkit.RepoFiles(t) {
		if !strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			declared[m[1]] = true
		}
	}
	if len(declared) < 100 {
		t.Fatalf("found %d test functions", len(declared))
	}
	named := regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)(\*?)`)
	for name, page := range docPages(t) {
		for _, m := range named.FindAllStringSubmatch(page, -1) {
			if m[2] == "*" {
				if !slices.ContainsFunc(slices.Collect(maps.Keys(declared)), func(d string) bool { return strings.HasPrefix(d, m[1]) }) {
					t.Errorf("%s names %s*, and no test starts with %s", name, m[1], m[1])
				}
				continue
			}
			if !declared[m[1]] {
				t.Errorf("%s names %s, which no _test.go file declares", name, m[1])
			}
		}
	}
}

// TestNoSpecSectionCitations: no comment, script or page of the repository
// explains itself by a section of the product spec ("SPEC §9"), which is
// not in the repository: a reader cannot follow it. The reason is written
// where it applies instead (the developers' guide). Public standards
// (RFC 3986 §2, the WHATWG HTML standard) are not meant.
func TestNoSpecSectionCitations(t *testing.T) {
	cite := regexp.MustCompile(`\bSPEC(?:\.md)?\s*§|\bSPEC\.md\b`)
	root := testkit.ModuleRoot(t)
	files := 0
	for _, p := range testkit.RepoFiles(t) {
		switch filepath.Ext(p) {
		case ".go", ".md", ".sh", ".yaml", ".yml", ".mjs", ".js", ".html", ".sql", "":
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		files++
		// Most files never say SPEC: skip them before the per-line
		// regexp, which under -race took a minute over the whole tree.
		if !bytes.Contains(b, []byte("SPEC")) {
			continue
		}
		for i, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "SPEC") && cite.MatchString(l) && !strings.HasSuffix(p, "docs_repo_test.go") {
				t.Errorf("%s:%d cites the spec, which is not in the repository: %s", p, i+1, strings.TrimSpace(l))
			}
		}
	}
	if files < 100 {
		t.Fatalf("read %d files", files)
	}
}
