package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestDocsConfigSnippets: the config the README and docs write decodes:
// every ```yaml block that is a config (its top-level keys are config
// keys), and every inline `key: value` whose key names one config key
// (`max_inflight_bytes: 64MiB`, `review.store: postgres`; a bare key that
// several sections have, such as `store`, is skipped), placed at its path,
// goes through ParseBytes (unknown keys, wrong types) without a problem.
// ${VAR} in a value is set to 1 for the check.
func TestDocsConfigSnippets(t *testing.T) {
	leaves := map[string][][]pathSeg{}
	configPaths(reflect.TypeFor[File](), nil, leaves)
	pages, _ := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	pages = append(pages, filepath.Join("..", "README.md"))
	top := map[string]bool{}
	for _, f := range yamlFields(reflect.TypeFor[File]()) {
		top[f.name] = true
	}
	checked := 0
	check := func(page, what string, raw []byte) {
		t.Helper()
		for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`).FindAllStringSubmatch(string(raw), -1) {
			t.Setenv(m[1], "1")
		}
		checked++
		if _, err := ParseBytes("snippet.yaml", raw); err != nil {
			t.Errorf("%s: %s does not decode as config: %v\n%s", page, what, err, raw)
		}
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		page := filepath.Base(p)
		for i, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(b, -1) {
			var doc map[string]any
			if yaml.Unmarshal(m[1], &doc) != nil || len(doc) == 0 {
				continue
			}
			isConfig := true
			for k := range doc {
				isConfig = isConfig && top[k]
			}
			if isConfig {
				check(page, fmt.Sprintf("yaml block %d", i+1), m[1])
			}
		}
		for _, m := range regexp.MustCompile("`([a-z_][a-z_.]*): ([^`]+)`").FindAllStringSubmatch(string(b), -1) {
			key, val := m[1], m[2]
			segs := strings.Split(key, ".")
			var path []pathSeg
			for _, cand := range leaves[segs[len(segs)-1]] {
				if pathEndsWith(cand, segs) {
					if path != nil {
						path = nil // ambiguous
						break
					}
					path = cand
				}
			}
			if path == nil || strings.Contains(val, `\|`) { // "exactly \| max": alternatives, not a value
				continue
			}
			var v yaml.Node
			if err := yaml.Unmarshal([]byte(val), &v); err != nil || len(v.Content) != 1 {
				t.Errorf("%s: %q: the value is not YAML: %v", page, m[0], err)
				continue
			}
			var node any = v.Content[0]
			for i := len(path) - 1; i >= 0; i-- {
				node = map[string]any{path[i].name: node}
				if i > 0 && path[i-1].list {
					node = []any{node}
				}
			}
			raw, err := yaml.Marshal(node)
			if err != nil {
				t.Fatal(err)
			}
			check(page, m[0], raw)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d config snippets found in the docs", checked)
	}
}

// pathSeg is one key on the way to a config key; list: its value is a
// list of mappings (upstreams, routes, a policy kind).
type pathSeg struct {
	name string
	list bool
}

// configPaths maps each config key to every path it has from the top.
func configPaths(t reflect.Type, prefix []pathSeg, out map[string][][]pathSeg) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[File]().PkgPath() {
		return
	}
	for _, f := range yamlFields(t) {
		ft := f.typ
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		list := ft.Kind() == reflect.Slice
		if list {
			ft = ft.Elem()
		}
		p := append(append([]pathSeg{}, prefix...), pathSeg{f.name, list})
		out[f.name] = append(out[f.name], p)
		configPaths(ft, p, out)
	}
}

// pathEndsWith: the path's last keys are segs.
func pathEndsWith(path []pathSeg, segs []string) bool {
	if len(segs) > len(path) {
		return false
	}
	for i := range segs {
		if path[len(path)-len(segs)+i].name != segs[i] {
			return false
		}
	}
	return true
}

// TestConfigDocs: docs/config.md's key tables and the config structs name
// the same keys. Each section's table lists every YAML key of its struct
// and nothing else; keys of a nested struct (review's webhook.url, a
// route's budget and retry, a policy's {path, set}) are written in the
// row of their parent; and every top-level key has its section.
func TestConfigDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, f := range yamlFields(reflect.TypeFor[File]()) {
		if !strings.Contains(doc, "\n## `"+f.name+"`\n") && !strings.Contains(doc, "\n## `"+f.name+"[]`\n") {
			t.Errorf("docs/config.md has no section ## `%s` (or `%[1]s[]`)", f.name)
		}
	}
	for _, s := range []struct {
		heading string
		typ     reflect.Type
		own     map[string]bool // fields with a section of their own
	}{
		{"## `server`", reflect.TypeFor[Server](), map[string]bool{"rate_limit": true}},
		{"### `server.rate_limit`", reflect.TypeFor[RateLimit](), nil},
		{"## `audit`", reflect.TypeFor[Audit](), nil},
		{"## `review`", reflect.TypeFor[Review](), nil},
		{"## `upstreams[]`", reflect.TypeFor[UpstreamDef](), nil},
		{"## `prompts[]`", reflect.TypeFor[PromptDef](), nil},
		{"## `contracts[]`", reflect.TypeFor[ContractDef](), map[string]bool{"policies": true}},
		{"### Policies", reflect.TypeFor[Policies](), nil},
		{"## `routes[]`", reflect.TypeFor[RouteDef](), nil},
	} {
		t.Run(strings.Trim(s.heading, "# `"), func(t *testing.T) {
			rows := tableRows(t, doc, s.heading)
			documented := map[string]string{} // key -> its row
			for _, row := range rows {
				for _, key := range rowKeys(row) {
					documented[key] = row
				}
			}
			fields := map[string]yamlField{}
			for _, f := range yamlFields(s.typ) {
				fields[f.name] = f
			}
			for key, row := range documented {
				name, sub, dotted := strings.Cut(key, ".")
				f, ok := fields[name]
				if !ok {
					t.Errorf("docs/config.md documents `%s`, which %s has no key for", key, s.typ.Name())
					continue
				}
				subs := nestedKeys(f.typ)
				if dotted && !subs[sub] {
					t.Errorf("docs/config.md documents `%s`: %s has no key %q", key, f.typ, sub)
				}
				// Keys written in braces in the key cell ({path, set}).
				for _, k := range braceKeys(strings.Split(row, "|")[1]) {
					if !subs[k] {
						t.Errorf("docs/config.md's row for `%s` names %q, which %s has no key for", name, k, f.typ)
					}
				}
			}
			for name, f := range fields {
				row, ok := documented[name]
				if !ok {
					// A struct documented by its dotted keys only.
					for key, r := range documented {
						if strings.HasPrefix(key, name+".") {
							row, ok = r, true
						}
					}
				}
				if !ok {
					t.Errorf("%s.%s (yaml %q) is not in docs/config.md's table under %s", s.typ.Name(), f.goName, name, s.heading)
					continue
				}
				if s.own[name] {
					continue
				}
				words := wordSet(rowsFor(documented, name, row))
				for sub := range nestedKeys(f.typ) {
					if !words[sub] {
						t.Errorf("%s's nested key %q is not written in docs/config.md's row for `%s`", s.typ.Name(), sub, name)
					}
				}
			}
		})
	}
	// labels[] is prose: {name, values: [..]}.
	sec := section(t, doc, "## `labels[]`")
	for _, f := range yamlFields(reflect.TypeFor[LabelDef]()) {
		if !wordSet(sec)[f.name] {
			t.Errorf("labels[] key %q is not in docs/config.md's labels section", f.name)
		}
	}
}

type yamlField struct {
	name, goName string
	typ          reflect.Type
}

// yamlFields are a struct's YAML keys.
func yamlFields(t reflect.Type) []yamlField {
	var out []yamlField
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, yamlField{name: name, goName: f.Name, typ: f.Type})
	}
	return out
}

// nestedKeys are the YAML keys under a field of type t (through pointers
// and slices, recursively: retry's shorten.ratio is "ratio"); none for
// scalars, durations and inline YAML (schemas, examples).
func nestedKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Duration]() || t == reflect.TypeFor[yaml.Node]() {
		return out
	}
	for _, f := range yamlFields(t) {
		out[f.name] = true
		for k := range nestedKeys(f.typ) {
			out[k] = true
		}
	}
	return out
}

// section is the text under heading, up to the next heading of any level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/config.md has no heading %s", heading)
	}
	if i := regexp.MustCompile(`(?m)^#{1,6} `).FindStringIndex(rest); i != nil {
		rest = rest[:i[0]]
	}
	return rest
}

// tableRows are the body rows of the section's table, an escaped \| in a
// cell made a slash.
func tableRows(t *testing.T, doc, heading string) []string {
	t.Helper()
	var rows []string
	for _, l := range strings.Split(section(t, doc, heading), "\n") {
		if strings.HasPrefix(l, "| `") {
			rows = append(rows, strings.ReplaceAll(l, `\|`, "/"))
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no table rows under %s", heading)
	}
	return rows
}

// rowKeys are the keys the first cell names: each code span's leading
// key ("`schema_file` / `schema`", "`labels: [{path, set}]`", "`webhook.url`").
func rowKeys(row string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([a-z_]+(?:\\.[a-z_]+)?)[^`]*`").FindAllStringSubmatch(strings.Split(row, "|")[1], -1) {
		out = append(out, m[1])
	}
	return out
}

// braceKeys are the keys inside {…} in a cell ("{path, exactly / max}").
func braceKeys(cell string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\{([^}]*)\}`).FindAllStringSubmatch(cell, -1) {
		out = append(out, regexp.MustCompile(`[a-z_]+`).FindAllString(m[1], -1)...)
	}
	return out
}

// rowsFor joins the rows documenting key or its dotted keys.
func rowsFor(documented map[string]string, key, row string) string {
	text := row
	for k, r := range documented {
		if strings.HasPrefix(k, key+".") {
			text += "\n" + k + "\n" + r
		}
	}
	return text
}

func wordSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range regexp.MustCompile(`[a-z_]+`).FindAllString(s, -1) {
		out[w] = true
	}
	return out
}
