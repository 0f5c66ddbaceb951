package contracts

import (
	"encoding/json"
	"strings"
	"testing"
)

// A small depth limit so the fuzzer reaches too_deep; a size limit so it
// reaches too_large.
var fuzzLimits = Limits{MaxBytes: 4096, MaxDepth: 8}

func addExtractSeeds(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `{"a":1}`, ` {"a": [1, 2.5e3, "x", true, null]} `,
		`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `[1,2]`, `"s"`, `42`,
		"```json\n{\"a\":1}\n```", "Sure! {\"a\":1} Thanks", `{"a":1}{"b":2}`,
		`{"text": "{\"a\":1}"}`, `{"text": "` + "```json\\n{\\\"a\\\":1}\\n```" + `"}`,
		`{"a":1,}`, `{'a': 'b'}`, `{"a": [1, 2`, `Here: {"a": {"b": "x`,
		`Use {name}: {"a":"}{"}`, `{x {"a":1}`, strings.Repeat("[", 20), extractDeepObject(10),
		"{\"a\":\"\xff\"}", `{"a":"\ud800"}`, "\ufeff{}", `{"a":"\u0000"}`,
	} {
		f.Add(s, false)
	}
}

func FuzzExtractStrict(f *testing.F) {
	addExtractSeeds(f)
	f.Fuzz(func(t *testing.T, in string, hasText bool) {
		ex, vs := Extract(in, ModeStrict, fuzzLimits, hasText)
		checkExtracted(t, in, ModeStrict, ex, vs)
		if vs != nil {
			return
		}
		if !json.Valid([]byte(in)) {
			t.Fatalf("strict accepted %q, encoding/json rejects it", in)
		}
		// Lenient takes what strict takes (when no wrapper applies).
		if lex, lvs := Extract(in, ModeLenient, fuzzLimits, true); lvs != nil || string(lex.JSON) != string(ex.JSON) {
			t.Fatalf("strict accepted %q, lenient gave %q %v", in, lex.JSON, lvs)
		}
	})
}

func FuzzExtractLenient(f *testing.F) {
	addExtractSeeds(f)
	f.Fuzz(func(t *testing.T, in string, hasText bool) {
		ex, vs := Extract(in, ModeLenient, fuzzLimits, hasText)
		checkExtracted(t, in, ModeLenient, ex, vs)
		if vs == nil && hasText && !strings.Contains(in, string(ex.JSON)) {
			t.Fatalf("lenient JSON %q is not part of %q", ex.JSON, in)
		}
	})
}

func FuzzExtractRepair(f *testing.F) {
	addExtractSeeds(f)
	f.Fuzz(func(t *testing.T, in string, hasText bool) {
		ex, vs := Extract(in, ModeRepair, fuzzLimits, hasText)
		checkExtracted(t, in, ModeRepair, ex, vs)
		// Repair never overrides what lenient accepts.
		if lex, lvs := Extract(in, ModeLenient, fuzzLimits, hasText); lvs == nil && string(lex.JSON) != string(ex.JSON) {
			t.Fatalf("lenient accepted %q from %q, repair gave %q %v", lex.JSON, in, ex.JSON, vs)
		}
	})
}
