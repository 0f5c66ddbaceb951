package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// errorUse is one (status, type, code) the package sends.
type errorUse struct {
	Status int
	Type   string
	Code   string
}

// notAnswered are codes the package declares but never answers over HTTP.
var notAnswered = map[string]string{}

// TestErrorCodesDocumented: docs/clients.md's error table is exactly the
// (status, type, code) triples the package's code sends: APIError
// literals, badRequest (400 invalid_request_error) and Server.review (422
// needs_review) calls, read from the source; every ErrorCode and ErrorType
// constant is in it; and every "status `code`" written elsewhere in the
// README and docs (review.md's table included) is one of its rows.
func TestErrorCodesDocumented(t *testing.T) {
	used := sentErrors(t)
	codes, types := errorConsts(t)
	doc := readDoc(t, "docs/clients.md")
	_, sec, ok := strings.Cut(doc, "\n## Error codes\n")
	if !ok {
		t.Fatal("docs/clients.md has no ## Error codes section")
	}
	row := regexp.MustCompile("(?m)^\\| ([0-9]{3}) \\| `([a-z_]+)` \\| `([a-z_]+)` \\|")
	table := map[errorUse]bool{}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		st, _ := strconv.Atoi(m[1])
		table[errorUse{st, m[2], m[3]}] = true
	}
	for u := range used {
		if _, ok := notAnswered[u.Code]; !ok && !table[u] {
			t.Errorf("the code sends %d %s %s; docs/clients.md's error table has no such row", u.Status, u.Type, u.Code)
		}
	}
	for r := range table {
		if !used[r] {
			t.Errorf("docs/clients.md's error table has %d %s %s, which the code never sends", r.Status, r.Type, r.Code)
		}
	}
	documented := map[string]bool{}
	for r := range table {
		documented[r.Code], documented[r.Type] = true, true
	}
	for _, c := range append(codes, types...) {
		if _, ok := notAnswered[c]; !ok && !documented[c] {
			t.Errorf("%s (proxy/errors.go) is not in docs/clients.md's error table", c)
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
					return r.Status == st && (r.Code == name || r.Type == name)
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

// errorConsts are the values of the ErrorCode and ErrorType constants.
func errorConsts(t *testing.T) (codes, types []string) {
	t.Helper()
	for name, v := range stringConsts(t, "errors.go") {
		switch {
		case strings.HasPrefix(name, "Code"):
			codes = append(codes, v)
		case strings.HasPrefix(name, "type"):
			types = append(types, v)
		}
	}
	if len(codes) < 20 || len(types) < 5 {
		t.Fatalf("read %d codes and %d types from errors.go", len(codes), len(types))
	}
	return codes, types
}

// stringConsts maps the string constants of a file to their values.
func stringConsts(t *testing.T, file string) map[string]string {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(af, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[id.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
		return true
	})
	return out
}

// httpStatuses maps net/http's Status* names to their numbers, read from
// the standard library's source, plus this package's StatusClientClosed.
func httpStatuses(t *testing.T) map[string]int {
	t.Helper()
	root := runtime.GOROOT() // "" in a -trimpath build: ask the go command
	if root == "" {
		b, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			t.Fatalf("go env GOROOT: %v", err)
		}
		root = strings.TrimSpace(string(b))
	}
	af, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "src", "net", "http", "status.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{"StatusClientClosed": StatusClientClosed}
	ast.Inspect(af, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, id := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.INT {
						out[id.Name], _ = strconv.Atoi(lit.Value)
					}
				}
			}
		}
		return true
	})
	if out["StatusNotFound"] != 404 {
		t.Fatalf("net/http's status.go read wrong: %v", out)
	}
	return out
}

// sentErrors reads the (status, type, code) triples the package's source
// sends: APIError{Status, Type, Code} literals whose three fields are
// constants, badRequest(CodeX, ...) and s.review(..., CodeX).
func sentErrors(t *testing.T) map[errorUse]bool {
	t.Helper()
	consts := stringConsts(t, "errors.go")
	statuses := httpStatuses(t)
	files, _ := filepath.Glob("*.go")
	out := map[errorUse]bool{}
	name := func(e ast.Expr) string {
		switch v := e.(type) {
		case *ast.Ident:
			return v.Name
		case *ast.SelectorExpr:
			return v.Sel.Name
		}
		return ""
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if name(x.Type) != "APIError" {
					return true
				}
				fields := map[string]string{}
				for _, e := range x.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						fields[name(kv.Key)] = name(kv.Value)
					}
				}
				st, okS := statuses[fields["Status"]]
				typ, okT := consts[fields["Type"]]
				code, okC := consts[fields["Code"]]
				switch {
				case okS && okT && okC:
					out[errorUse{st, typ, code}] = true
				case fields["Code"] == "code" || fields["Code"] == "Code" && fields["Type"] == "Type":
					// badRequest's and review's own literal, or a 422 decoded
					// from a stored body: their calls are read below.
				default:
					t.Errorf("%s: an APIError whose status, type and code are not all constants (%v): extend sentErrors", fset.Position(x.Pos()), fields)
				}
			case *ast.CallExpr:
				args := x.Args
				switch fn := name(x.Fun); {
				case fn == "badRequest" && len(args) > 0:
					if code, ok := consts[name(args[0])]; ok {
						out[errorUse{400, consts["typeInvalidRequest"], code}] = true
					} else {
						t.Errorf("%s: badRequest with a code that is not a constant", fset.Position(x.Pos()))
					}
				case fn == "review" && len(args) == 4:
					if code, ok := consts[name(args[3])]; ok {
						out[errorUse{422, consts["typeNeedsReview"], code}] = true
					} else {
						t.Errorf("%s: review with a code that is not a constant", fset.Position(x.Pos()))
					}
				}
			}
			return true
		})
	}
	if len(out) < 20 {
		t.Fatalf("read only %d errors from the source: %v", len(out), out)
	}
	return out
}
