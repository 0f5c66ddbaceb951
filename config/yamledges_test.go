package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		wantOneProblem(t, tt.yaml, "c.yaml:1: "+tt.want)
	}
}

// wantOneProblem: yaml, loaded as c.yaml, has exactly one problem, which
// validate prints as want.
func wantOneProblem(t *testing.T, yaml, want string) {
	t.Helper()
	_, err := LoadBytes("c.yaml", []byte(yaml))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Errorf("%q: want one problem, got %v", yaml, err)
		return
	}
	if got := ce.Problems[0].String(); got != want {
		t.Errorf("%q:\n got %s\nwant %s", yaml, got, want)
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
		wantOneProblem(t, tt.yaml, tt.want)
	}
}

// TestMergeKeys: YAML merge keys share settings between list items
// (`<<: *defaults`, a list of them, a merge inside the merged mapping);
// the item's own keys win. Before, "<<" was refused as an unknown key.
func TestMergeKeys(t *testing.T) {
	rt, err := LoadBytes(filepath.Join(t.TempDir(), "c.yaml"), []byte(`
upstreams:
  - &up {name: up, base_url: "http://127.0.0.1:1/v1", timeout: 7s}
  - {<<: *up, name: up2}
prompts: [{name: p, system: "S"}]
contracts:
  - &k
    name: k
    schema: {type: object, additionalProperties: false, properties: {a: {type: string}}}
    extraction: lenient
  - {<<: *k, name: k2, extraction: repair}
routes:
  - &r {name: r1, upstream: up, model: m, prompt: p, contract: k, temperature: 0.5}
  - &low {<<: *r, name: r2, temperature: 0.1}
  - <<: [*low, *r]
    name: r3
    model: m3
`))
	if err != nil {
		t.Fatal(err)
	}
	if u := rt.Upstreams["up2"]; u == nil || u.BaseURL != "http://127.0.0.1:1/v1" || u.Timeout != 7*time.Second {
		t.Errorf("up2 did not merge up: %+v", u)
	}
	if rt.Contracts["k2"] == nil || rt.Contracts["k2"].Schema == nil {
		t.Errorf("k2 did not merge k's schema: %+v", rt.Contracts["k2"])
	}
	r2, r3 := rt.Routes["r2"], rt.Routes["r3"]
	if r2 == nil || r2.Model != "m" || r2.Plan[0].Temperature != 0.1 || r2.Contract.Name != "k" {
		t.Errorf("r2: %+v", r2)
	}
	if r3 == nil || r3.Model != "m3" || r3.Plan[0].Temperature != 0.1 {
		t.Errorf("r3 (first of the merge list wins, own keys over both): %+v", r3)
	}

	_, err = LoadBytes("c.yaml", []byte("contracts:\n  - <<: 3\n    name: k\n    schema: {type: object}\n"))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].String() != "c.yaml:2: contracts[0].<<: a merge key (<<) takes a mapping or a list of mappings, like <<: *defaults" {
		t.Errorf("merge of a scalar: %v", err)
	}
}

// TestSchemaFileThroughSymlink: relative paths resolve against the
// directory the config file was named in, from any working directory;
// named through a symlink, that is the link's directory (as for a
// ConfigMap's links). A schema_file that sits only beside the link's
// target was "cannot read schemas/a.json: no such file or directory",
// naming neither where it was looked for nor why; the problem now says
// both and what to do.
func TestSchemaFileThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	for _, d := range []string{filepath.Join(real, "schemas"), link} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTestFile(t, filepath.Join(real, "schemas", "a.json"), `{"type": "object", "additionalProperties": false}`)
	writeTestFile(t, filepath.Join(real, "c.yaml"), "audit: {sink: file, path: audit.jsonl}\ncontracts: [{name: a, schema_file: schemas/a.json}]\n")
	if err := os.Symlink(filepath.Join("..", "real", "c.yaml"), filepath.Join(link, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // the paths below are relative to the working directory, not the config's
	rt, err := Load(filepath.Join("real", "c.yaml"))
	if err != nil {
		t.Fatalf("the real file: %v", err)
	}
	if want := filepath.Join(real, "audit.jsonl"); rt.Audit.Path != want {
		t.Errorf("audit.path %q, want %q", rt.Audit.Path, want)
	}
	_, err = Load(filepath.Join("link", "c.yaml"))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("through the link: want one problem, got %v", err)
	}
	if r, err := filepath.EvalSymlinks(real); err == nil {
		real = r
	}
	want := fmt.Sprintf("cannot read schemas/a.json: no such file or directory (looked for %s: a relative path is relative to the directory of the config file as named, %s, not of the symlink's target, %s, where schemas/a.json is: name the target with -c, or make the path absolute or relative to %s)",
		filepath.Join(link, "schemas", "a.json"), link, real, link)
	if got := ce.Problems[0].Message; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMaxBodyOverDefaultInflight: a max_body_bytes above the default
// max_inflight_bytes, which the user did not write, is reported at the key
// they wrote and its line, naming the default and what to set; it was
// "c.yaml:1: server.max_inflight_bytes: must be at least max_body_bytes",
// at the server: line, about a key not in the file.
func TestMaxBodyOverDefaultInflight(t *testing.T) {
	_, err := LoadBytes("c.yaml", []byte("server:\n  max_body_bytes: 9223372036854775807\n"))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	want := fmt.Sprintf("c.yaml:2: server.max_body_bytes: must be at most max_inflight_bytes (default %d): a body that size could never be served; set server.max_inflight_bytes to at least 9223372036854775807", DefaultMaxInflightBytes)
	if got := ce.Problems[0].String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
