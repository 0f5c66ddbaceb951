package contracts

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const d4 = `"$schema":"http://json-schema.org/draft-04/schema#",`

// TestDialectViolations: the dialect checks report the keyword the user
// wrote, at a pointer into the output, on both paths.
func TestDialectViolations(t *testing.T) {
	tests := []struct {
		name, schema, instance string
		want                   []string
		msg                    string
	}{
		{"draft-04 integer with a fraction", `{` + d4 + `"type":"object","properties":{"userId":{"type":"integer"}}}`,
			`{"userId":12345.0}`, []string{"/userId type"}, msgDraft4Integer},
		{"draft-04 integer with an exponent, in an array", `{` + d4 + `"type":"object","properties":{"l":{"type":"array","items":{"type":["integer","null"]}}}}`,
			`{"l":[1,null,2E0]}`, []string{"/l/2 type"}, msgDraft4Integer},
		{"draft-04 non-integer fails type once", `{` + d4 + `"type":"object","properties":{"n":{"type":"integer"}}}`,
			`{"n":1.5}`, []string{"/n type"}, ""},
		{"draft-04 integer beside other checks", `{` + d4 + `"type":"object","properties":{"n":{"type":"integer","format":"int32","maximum":3,"allOf":[{"minimum":0}]}}}`,
			`{"n":2.0}`, []string{"/n type"}, msgDraft4Integer},
		{"draft-2020-12 integer with a zero fraction", `{"type":"object","properties":{"n":{"type":"integer"}}}`,
			`{"n":12345.0}`, []string{}, ""},
		{"empty enum", `{"type":"object","properties":{"e":{"enum":[]}}}`,
			`{"e":"x"}`, []string{"/e enum"}, msgEmptyEnum},
		{"draft-04 ignores if/then/else", `{` + d4 + `"type":"object","if":{"required":["a"]},"then":{"required":["b"]},"else":false}`,
			`{"a":1}`, []string{}, ""},
		{"draft-06 ignores if but applies const", `{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","if":true,"else":false,"properties":{"k":{"const":"A"}}}`,
			`{"k":"B"}`, []string{"/k const"}, ""},
		{"draft-07 siblings of $ref are ignored", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"o":{"type":"object"}},"$ref":"#/definitions/o","required":["x"]}`,
			`{}`, []string{}, ""},
		{"draft 2019-09 siblings of $ref apply", `{"$schema":"https://json-schema.org/draft/2019-09/schema","$defs":{"o":{"type":"object"}},"$ref":"#/$defs/o","required":["x"]}`,
			`{}`, []string{" required"}, ""},
		{"draft-04 boolean exclusiveMaximum", `{` + d4 + `"type":"object","properties":{"n":{"maximum":3,"exclusiveMaximum":true}}}`,
			`{"n":3}`, []string{"/n exclusiveMaximum"}, ""},
		{"draft-07 dependencies", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","dependencies":{"a":["b"],"c":{"required":["d"]}}}`,
			`{"a":1,"c":2}`, []string{" dependencies", " required"}, ""},
		{"2020-12 honours dependencies, dependents judged by 2020-12", `{"type":"object","dependencies":{"a":["b"],"c":{"properties":{"t":{"prefixItems":[{"type":"string"}]}}}}}`,
			`{"a":1,"c":2,"t":[1]}`, []string{" dependencies", "/t/0 type"}, ""},
		{"draft-07 array items and additionalItems", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"t":{"items":[{"type":"string"}],"additionalItems":false}}}`,
			`{"t":["a",1]}`, []string{"/t/1 additionalItems"}, ""},
		{"draft-07 ignores prefixItems and unevaluatedProperties", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"t":{"prefixItems":[{"type":"string"}]}},"unevaluatedProperties":false}`,
			`{"t":[1],"x":1}`, []string{}, ""},
		{"subschema declares its own draft", `{` + d4 + `"type":"object","properties":{"a":{"$schema":"http://json-schema.org/draft-07/schema#","if":{"type":"string"},"then":{"minLength":2}},"b":{"if":{"type":"string"},"then":{"minLength":2}}}}`,
			`{"a":"x","b":"x"}`, []string{"/a minLength"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSchema(t, tt.schema)
			v := mustValue(t, tt.instance)
			vs := s.Validate(v)
			if got := rules(vs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if got := rules(s.validateLibrary(v)); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("library path: got %q, want %q", got, tt.want)
			}
			if s.fast != nil && s.fast.valid(v) != (len(tt.want) == 0) {
				t.Fatalf("fast path says valid=%v", s.fast.valid(v))
			}
			if tt.msg != "" && (len(vs) != 1 || vs[0].Message != tt.msg) {
				t.Fatalf("message: got %v, want %q", vs, tt.msg)
			}
		})
	}
}

// TestDialectKeepsFastPath: dropped keywords no longer block the fast path,
// and the sentinels are modelled by it.
func TestDialectKeepsFastPath(t *testing.T) {
	for _, doc := range []string{
		`{` + d4 + `"type":"object","properties":{"n":{"type":"integer"}},"if":{"propertyNames":{"maxLength":1}},"unevaluatedProperties":false}`,
		`{"type":"object","properties":{"e":{"enum":[]}}}`,
	} {
		s := mustSchema(t, doc)
		if s.fast == nil {
			_, why := buildFast(s.libDoc, s.UnknownFormats, s.dialect)
			t.Errorf("%s: no fast path (%s)", doc, why)
		}
	}
}

// TestDialectWarnings: contractd validate names each keyword the declared
// draft ignores.
func TestDialectWarnings(t *testing.T) {
	tests := []struct {
		schema string
		want   []string
	}{
		{`{` + d4 + `"type":"object","if":{"required":["a"]},"then":{},"properties":{"a":{"const":1,"$id":"x"}}}`, []string{
			"at #: if is ignored: it is not a draft-04 keyword (introduced in draft-07)",
			"at #: then is ignored: it is not a draft-04 keyword (introduced in draft-07)",
			"at #/properties/a: $id is ignored: it is not a draft-04 keyword (introduced in draft-06)",
			"at #/properties/a: const is ignored: it is not a draft-04 keyword (introduced in draft-06)",
		}},
		{`{"type":"object","dependencies":{"a":["b"]},"definitions":{"x":{"id":"y"}},"items":[true],"additionalItems":false}`, []string{
			"at #: additionalItems is not a draft 2020-12 keyword (last defined in draft 2019-09); read with an array-form items",
			"at #: definitions is not a draft 2020-12 keyword (last defined in draft-07); read as $defs",
			"at #: dependencies is not a draft 2020-12 keyword (last defined in draft 2019-09); honoured as dependentRequired/dependentSchemas",
			"at #: items as an array is not a draft 2020-12 form (it is draft 2019-09's and earlier); read as prefixItems",
			"at #/definitions/x: id is ignored: it is not a draft 2020-12 keyword (last defined in draft-04)",
		}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/a","definitions":{"a":{}},"required":["x"],"title":"t"}`, []string{
			"at #: required is ignored: draft-07 ignores the siblings of $ref",
		}},
		{`{"$schema":"http://json-schema.org/schema#","type":"object"}`, []string{
			`at #: $schema "http://json-schema.org/schema#" is not a draft contractd knows (draft-04, -06, -07, 2019-09, 2020-12); judged as draft 2020-12`,
		}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"if":true}}}`, nil},
	}
	for _, tt := range tests {
		s := mustSchema(t, tt.schema)
		if !reflect.DeepEqual(s.DialectWarnings, tt.want) {
			t.Errorf("%s:\n got %q\nwant %q", tt.schema, s.DialectWarnings, tt.want)
		}
	}
}

// The document printed by {{ schema }} is the user's, not the rewrite.
func TestDialectKeepsUserDocument(t *testing.T) {
	doc := `{` + d4 + `"type":"object","properties":{"n":{"type":"integer"}},"if":{}}`
	s := mustSchema(t, doc)
	if string(s.JSON()) != doc {
		t.Fatalf("JSON() = %s", s.JSON())
	}
	if _, ok := s.Doc()["if"]; !ok {
		t.Fatal("Doc() lost a keyword")
	}
	if strings.Contains(string(s.JSON()), sentinelPrefix) {
		t.Fatal("sentinel leaked into the user's document")
	}
}

// A $dynamicRef the validator's dynamic scope would resolve wrongly is
// refused rather than judged wrongly (a false accept otherwise).
func TestDialectRefusesSkippedDynamicScope(t *testing.T) {
	doc := `{"$id":"https://example.com/base","$ref":"first#/$defs/stuff","$defs":{
	 "first":{"$id":"first","$defs":{"stuff":{"$ref":"second#/$defs/stuff"}}},
	 "second":{"$id":"second","$defs":{"stuff":{"$dynamicRef":"#length"},"length":{"$dynamicAnchor":"length","maxLength":2}}}}}`
	if _, err := CompileSchema([]byte(doc)); err == nil || !strings.Contains(err.Error(), "$dynamicRef") {
		t.Fatalf("got %v, want a refusal naming $dynamicRef", err)
	}
}

// Patterns Go's RE2 cannot run are refused at compile, naming the
// ECMA-262 construct (docs/schema-agreement.md has the measurements).
func TestPatternRefusalNamesTheConstruct(t *testing.T) {
	for doc, want := range map[string]string{
		`{"properties":{"p":{"type":"string","pattern":"^(?=.*\\d)[a-z\\d]+$"}}}`:  `pattern "^(?=.*\\d)[a-z\\d]+$" at #/properties/p/pattern uses a lookahead (?=...)`,
		`{"properties":{"p":{"pattern":"(?!x)"}}}`:                                 "a negative lookahead (?!...)",
		`{"properties":{"p":{"pattern":"(?<=a)b"}}}`:                               "a lookbehind (?<=...)",
		`{"patternProperties":{"^(\\w)\\1$":true}}`:                                `at #/patternProperties uses a backreference (\1, \k<name>)`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","pattern":"^\\cC$"}`: `a control escape (\cX)`,
		`{"properties":{"p":{"pattern":"(?<"}}}`:                                   `pattern "(?<" at #/properties/p/pattern does not compile`,
	} {
		_, err := CompileSchema([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}

// FuzzSchemaDialects: for any schema document, under any default draft,
// compiling never panics, the fast path (when built) gives the library's
// verdict, an invalid verdict names its reasons, and no sentinel leaks.
func FuzzSchemaDialects(f *testing.F) {
	for _, c := range []struct{ schema, inst string }{
		{`{` + d4 + `"type":"object","properties":{"n":{"type":"integer"}},"if":{"required":["n"]},"then":false}`, `{"n":1.0}`},
		{`{"properties":{"e":{"enum":[]},"t":{"items":[{"type":"integer"}],"additionalItems":false}}}`, `{"t":[1,2],"e":null}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"const":1}},"$ref":"#/definitions/a","minimum":5}`, `1`},
		{`{"$schema":"http://json-schema.org/draft-06/schema#","dependencies":{"a":["b"],"c":{"not":{}}},"$defs":{"x":{}}}`, `{"a":1,"c":[1e2]}`},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":["integer","null"],"allOf":[{"multipleOf":2}]}`, `4.0`},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"integer"}]}}}`, `{"a":[1.0,2]}`},
	} {
		for d := range 5 {
			f.Add([]byte(c.schema), []byte(c.inst), uint8(d))
		}
	}
	f.Fuzz(func(t *testing.T, schema, inst []byte, d uint8) {
		s, err := compileSchema(schema, compileOptions{dialect: fdialect(d % 5)})
		if err != nil {
			return
		}
		v, err := DecodeJSON(inst)
		if err != nil {
			return
		}
		lib := libValid(s, v)
		if s.fast != nil && s.fast.valid(v) != lib {
			t.Fatalf("fast %v, library %v", !lib, lib)
		}
		vs := s.Validate(v)
		if lib != (len(vs) == 0) {
			t.Fatalf("library valid=%v but violations %v", lib, vs)
		}
		for _, x := range vs {
			if strings.Contains(x.Rule+x.Message, sentinelPrefix) {
				t.Fatalf("sentinel leaked: %v", x)
			}
		}
	})
}

// Patterns are ECMA-262: \s and \S keep their meaning (Unicode spaces),
// which Go's RE2 gives only to ASCII; messages quote the user's pattern.
func TestPatternECMAWhitespace(t *testing.T) {
	for _, c := range []struct {
		pattern, value string
		valid          bool
	}{
		{`^\S+$`, "a\u00a0b", false},
		{`^\S+$`, "ab", true},
		{`^a\sb$`, "a\u2003b", true},
		{`^[\s\d]+$`, "1\u30002", true},
		{`^[^\s]+$`, "a\u00a0b", false},
		{`^\\s$`, `\s`, true},        // an escaped backslash, then s
		{`^[\S]+$`, "a\u00a0", true}, // \S inside a class keeps RE2's meaning
	} {
		s := mustSchema(t, `{"type":"object","properties":{"v":{"type":"string","pattern":`+quoteJSON(c.pattern)+`}},"patternProperties":{"^x\\s":{"type":"integer"}}}`)
		v := map[string]any{"v": c.value}
		vs := s.Validate(v)
		if (len(vs) == 0) != c.valid || s.fast == nil || s.fast.valid(v) != c.valid {
			t.Errorf("%s on %q: violations %v, want valid=%v", c.pattern, c.value, vs, c.valid)
		}
		for _, x := range vs {
			if !strings.Contains(x.Message, c.pattern) {
				t.Errorf("message %q does not quote the pattern %s", x.Message, c.pattern)
			}
		}
	}
	s := mustSchema(t, `{"type":"object","patternProperties":{"^x\\s":{"type":"integer"}}}`)
	if vs := s.Validate(map[string]any{"x\u00a0": "no"}); len(rules(vs)) != 1 {
		t.Errorf("patternProperties with \\s: %v", vs)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
