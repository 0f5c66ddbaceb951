package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureNamesExist: every function, method, type, field and
// file docs/architecture.md names (in its diagram and in backticks) is in
// the code, so the page a newcomer reads the request path by cannot name
// a step that was renamed, moved or removed. A qualified name is declared
// in the package it names ("audit.Switch", "contracts.Contract.Check"), an
// unqualified one ("serveRoute", "Caller.call") in one of the module's
// packages; a single plain word ("prepare", "model") is checked only when
// the module declares it. The paths it names (cmd/contractd/serve.go,
// internal/filewatch) must exist.
func TestArchitectureNamesExist(t *testing.T) {
	doc := readDoc(t, "docs/architecture.md")
	// Package directories of the module the page may qualify names with.
	pkgDir := map[string]string{}
	for _, d := range []string{"audit", "config", "contracts", "policy", "proxy", "retry", "review", "telemetry", "internal/jsonstr", "internal/jsonscan", "internal/filewatch"} {
		pkgDir[filepath.Base(d)] = d
	}
	decls := map[string]map[string]bool{} // package dir -> "Name", "Type.member"
	// declared: dir declares name, or, for a bare name, some type there
	// has it as a method or field ("telemetry.Middleware").
	declared := func(dir, name string) bool {
		if decls[dir] == nil {
			decls[dir] = declsIn(t, filepath.Join("..", dir))
		}
		if decls[dir][name] {
			return true
		}
		if !strings.Contains(name, ".") {
			for k := range decls[dir] {
				if strings.HasSuffix(k, "."+name) {
					return true
				}
			}
		}
		return false
	}
	inModule := func(name string) bool {
		for _, d := range pkgDir {
			if declared(d, name) {
				return true
			}
		}
		return false
	}
	var names []string
	// Backticked names: "serveRoute", "Prepared.build", "audit.Switch",
	// "*APIError"; and in the diagram the identifiers written in
	// camelCase or qualified ("exactPaths", "exchange.finish").
	for _, m := range regexp.MustCompile("`\\*?([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*)`").FindAllStringSubmatch(doc, -1) {
		names = append(names, m[1])
	}
	_, diagram, _ := strings.Cut(doc, "```\n")
	diagram, _, _ = strings.Cut(diagram, "```")
	ident := regexp.MustCompile(`\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b`)
	names = append(names, ident.FindAllString(diagram, -1)...)
	checked := 0
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		parts := strings.Split(name, ".")
		var ok bool
		switch d, pkg := pkgDir[parts[0]]; {
		case pkg && len(parts) > 1: // "audit.Switch", "contracts.Contract.Check"
			ok = declared(d, strings.Join(parts[1:], "."))
		case len(parts) > 1 && !isType(parts[0]):
			continue // another module's package (httputil.ReverseProxy) or a JSON name
		case len(parts) == 1 && !isCamel(name):
			// One word ("prepare", "model", "Authorization"): checked
			// when the module declares it, else prose.
			if inModule(name) {
				checked++
			}
			continue
		default: // "Caller.call", "serveRoute", "RecoverPanics"
			ok = inModule(name)
		}
		checked++
		if !ok {
			t.Errorf("docs/architecture.md names %s, which the module does not declare", name)
		}
	}
	if checked < 30 {
		t.Fatalf("only %d names checked: the page's format changed?", checked)
	}
	// Paths: "proxy/server.go", "internal/filewatch", "policy/".
	for _, m := range regexp.MustCompile("`((?:cmd|internal|proxy|config|contracts|policy|retry|audit|review|telemetry)(?:/[A-Za-z0-9_.]*)*)`").FindAllStringSubmatch(doc, -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("docs/architecture.md names %s: %v", m[1], err)
		}
	}
}

// isType reports whether q, the first part of a qualified name, is a
// type of the module (Caller, exchange, edge) rather than a package.
func isType(q string) bool {
	return q[0] >= 'A' && q[0] <= 'Z' || slices.Contains([]string{"exchange", "edge"}, q)
}

// isCamel reports whether name has an upper-case letter after its first.
func isCamel(name string) bool {
	return strings.ContainsFunc(name[1:], func(r rune) bool { return r >= 'A' && r <= 'Z' })
}

// declsIn is every name dir's non-test files declare at top level, as
// "Name", plus "Type.method" for methods and "Type.field" for struct
// fields.
func declsIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					out[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					out[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						out[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									out[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							out[n.Name] = true
						}
					}
				}
			}
		}
	}
	return out
}
