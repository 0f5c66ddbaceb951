package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestAliasBombRefused: nine aliases of nine aliases ... inside a schema
// (the "billion laughs") were expanded by the decoder and the schema
// compiler, taking gigabytes and minutes from a 700-byte file. It is now
// refused at once, naming the first alias's line; ordinary aliases load.
func TestAliasBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("contracts:\n  - name: a\n    schema:\n      type: object\n")
	b.WriteString("      x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "      x%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9), ", "))
	}
	_, err := LoadBytes("bomb.yaml", []byte(b.String()))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	if p := ce.Problems[0]; p.Line != 6 || !strings.Contains(p.Message, "alias bomb") {
		t.Errorf("problem %+v: want line 6 (the first alias), naming an alias bomb", p)
	}

	ok := "contracts:\n  - name: a\n    schema: {type: object, additionalProperties: false, properties: {a: &s {type: string}, b: *s, c: *s}}\n"
	if _, err := LoadBytes("ok.yaml", []byte(ok)); err != nil {
		t.Errorf("ordinary aliases refused: %v", err)
	}
}

// TestUnknownKeySays: an unknown key names the key it is closest to (a
// typo, another case, camelCase, a missing _env), else every key allowed
// at that level; before, it said only "unknown key", leaving the user to
// find the spelling in docs/config.md.
func TestUnknownKeySays(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"Server: {}\n", `Server: unknown key "Server" (did you mean "server"?)`},
		{"rotues: []\n", `rotues: unknown key "rotues" (did you mean "routes"?)`},
		{"upstreams: [{name: u, tiemout: 3s}]\n", `upstreams[0].tiemout: unknown key "tiemout" (did you mean "timeout"?)`},
		{"contracts: [{name: k, schemaFile: x.json}]\n", `contracts[0].schemaFile: unknown key "schemaFile" (did you mean "schema_file"?)`},
		{"server: {admin_keys: X}\n", `server.admin_keys: unknown key "admin_keys" (did you mean "admin_keys_env"?)`},
		{"routes: [{name: r, retry: [{shorten: {kep: head}}]}]\n", `routes[0].retry[0].shorten.kep: unknown key "kep" (did you mean "keep"?)`},
		{"bogus: 1\n", `bogus: unknown key "bogus" (allowed here: server, audit, upstreams, labels, prompts, contracts, routes, review)`},
	}
	for _, tt := range tests {
		_, err := LoadBytes("c.yaml", []byte(tt.yaml))
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Errorf("%q: want one problem, got %v", tt.yaml, err)
			continue
		}
		if got := ce.Problems[0].String(); got != "c.yaml:1: "+tt.want {
			t.Errorf("%q:\n got %s\nwant c.yaml:1: %s", tt.yaml, got, tt.want)
		}
	}
}

// TestYAMLSyntaxErrorLine: a YAML syntax error's line is the problem's
// line ("c.yaml:2: invalid YAML: ..."), where editors and CI annotations
// look; it was only inside the message ("c.yaml: invalid YAML: line 2:
// ..."). A line indented with a tab says so.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"contracts:\n\t- name: a\n", "c.yaml:2: invalid YAML: found character that cannot start any token (this line is indented with a tab: YAML indents with spaces only)"},
		{"server:\n  listen: [\n", "c.yaml:2: invalid YAML: did not find expected node content"},
		{"server: {listen: x\n", "c.yaml:1: invalid YAML: did not find expected ',' or '}'"},
	}
	for _, tt := range tests {
		_, err := LoadBytes("c.yaml", []byte(tt.yaml))
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Errorf("%q: want one problem, got %v", tt.yaml, err)
			continue
		}
		if got := ce.Problems[0].String(); got != tt.want {
			t.Errorf("%q:\n got %s\nwant %s", tt.yaml, got, tt.want)
		}
	}
}
