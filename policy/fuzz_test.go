package policy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
)

// FuzzParsePathWalk checks that arbitrary paths and documents never panic,
// and that every pointer Walk reports is canonical and leads back to the
// value it was reported with.
func FuzzParsePathWalk(f *testing.F) {
	seeds := []struct{ path, doc string }{
		{"", `{}`},
		{"/a/b", `{"a": {"b": 1}}`},
		{"/intents/*/label", `{"intents": [{"label": "x"}, {"label": 2}, {}]}`},
		{"/*/*", `{"a": [1, 2], "b": {"c~/": null}}`},
		{"/a~0~1b/*", `{"~/b": {"*": "star", "": ""}}`},
		{"//", `{"": {"": "e"}}`},
		{"/0/01/-", `[[1, [2]], {"01": {"-": true}}]`},
		{"/~2", `{}`},
		{"x", `[]`},
		{"/*", `"just a string"`},
		{"/type/*", `{"type": "object", "properties": {"a": {"$ref": "#"}}, "$ref": "#/properties"}`},
	}
	for _, s := range seeds {
		f.Add(s.path, []byte(s.doc))
	}
	f.Fuzz(func(t *testing.T, path string, data []byte) {
		p, err := ParsePath(path)
		if err != nil {
			if path == "" {
				t.Fatalf("empty path rejected: %v", err)
			}
			return
		}
		if p.String() != path {
			t.Fatalf("String() = %q, want %q", p.String(), path)
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}

		seen := map[string]bool{}
		p.Walk(v, func(b []byte, x any) {
			ptr := string(b)
			if seen[ptr] {
				t.Fatalf("pointer %q visited twice", ptr)
			}
			seen[ptr] = true
			if strings.Count(ptr, "/") != len(p.tokens) {
				t.Fatalf("pointer %q has the wrong depth for %q", ptr, path)
			}
			if !p.HasWildcard() && ptr != path {
				t.Fatalf("literal path %q reported as %q", path, ptr)
			}
			got, ok := resolvePointer(v, ptr)
			if !ok || !reflect.DeepEqual(got, x) {
				t.Fatalf("pointer %q does not resolve to the visited value", ptr)
			}
		})
		if !p.HasWildcard() && len(seen) > 1 {
			t.Fatalf("literal path visited %d values", len(seen))
		}
		if ptr := p.deepestExisting(v); !strings.HasPrefix(path, ptr) {
			t.Fatalf("deepestExisting %q is not a prefix of %q", ptr, path)
		}

		// The document doubles as a schema: must terminate without panicking.
		p.CanMatchSchema(v)
		if !p.CanMatchSchema(true) || p.CanMatchSchema(false) {
			t.Fatal("boolean schemas misjudged")
		}

		subj := &contracts.Subject{Input: v, LastUser: string(data), HasLastUser: true, SystemPrompt: path}
		for _, mk := range []func() (contracts.Policy, error){
			func() (contracts.Policy, error) { return NewLabels(path, "s", []string{"a"}) },
			func() (contracts.Policy, error) { return NewEvidence(path, "") },
			func() (contracts.Policy, error) { return NewEvidence(path, "/a") },
			func() (contracts.Policy, error) { return NewQuestions(path, intp(1), nil) },
			func() (contracts.Policy, error) { return NewForbidden("f", path, regexp.MustCompile(".")) },
			func() (contracts.Policy, error) { return NewPromptLeak(), nil },
		} {
			pol, err := mk()
			if err != nil {
				continue
			}
			vs, evs := pol.Check(v, subj)
			for _, x := range vs {
				if x.Path != "" && x.Path[0] != '/' {
					t.Fatalf("violation path %q", x.Path)
				}
			}
			for _, e := range evs {
				if e.Start < 0 || e.End <= e.Start {
					t.Fatalf("evidence offsets %+v", e)
				}
			}
		}

		// A prompt always leaks into itself.
		if ix := NewPromptLeakIndex(path); len(strings.Fields(path)) > 0 && !ix.Leaks(path) {
			t.Fatalf("prompt %q does not leak into itself", path)
		}
	})
}
