package proxy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// errorUse is one (status, type, code) the package sends.
type errorUse struct {
	Status int
	Type   ErrorType
	Code   ErrorCode
}

// TestErrorCodesDocumented: docs/clients.md's error table is exactly
// errorTable (errors.go: every code writeError answers, each with its one
// status and type); and every "status `code`" written elsewhere in the
// README and docs (review.md's table included) is one of its rows.
func TestErrorCodesDocumented(t *testing.T) {
	used := map[errorUse]bool{}
	for code, k := range errorTable {
		used[errorUse{k.Status, k.Type, code}] = true
	}
	doc := readDoc(t, "docs/clients.md")
	_, sec, ok := strings.Cut(doc, "\n## Error codes\n")
	if !ok {
		t.Fatal("docs/clients.md has no ## Error codes section")
	}
	row := regexp.MustCompile("(?m)^\\| ([0-9]{3}) \\| `([a-z_]+)` \\| `([a-z_]+)` \\|")
	table := map[errorUse]bool{}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		st, _ := strconv.Atoi(m[1])
		table[errorUse{st, ErrorType(m[2]), ErrorCode(m[3])}] = true
	}
	for u := range used {
		if !table[u] {
			t.Errorf("the code sends %d %s %s; docs/clients.md's error table has no such row", u.Status, u.Type, u.Code)
		}
	}
	for r := range table {
		if !used[r] {
			t.Errorf("docs/clients.md's error table has %d %s %s, which the code never sends", r.Status, r.Type, r.Code)
		}
	}
	// "503 `server_busy`", "| 409 | `review_already_resolved` |", "429
	// `rate_limit_error`/`rate_limit_exceeded`" anywhere else.
	mention := regexp.MustCompile("\\b([45][0-9]{2})(?: \\|)? `([a-z_]+)`(?:/`([a-z_]+)`)?")
	pages, _ := filepath.Glob("../docs/*.md")
	for _, p := range append(pages, "../README.md") {
		text := readDoc(t, strings.TrimPrefix(p, "../"))
		for _, m := range mention.FindAllStringSubmatch(text, -1) {
			st, _ := strconv.Atoi(m[1])
			for _, name := range m[2:] {
				if name == "" {
					continue
				}
				if !slices.ContainsFunc(slices.Collect(keysOf(table)), func(r errorUse) bool {
					return r.Status == st && (string(r.Code) == name || string(r.Type) == name)
				}) {
					t.Errorf("%s: %q: no error %d has the code or type %s", filepath.Base(p), m[0], st, name)
				}
			}
		}
	}
}

func keysOf(m map[errorUse]bool) func(func(errorUse) bool) {
	return func(yield func(errorUse) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
