package contracts

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// raceEnabled reports a -race build (the differential test then does less).
var raceEnabled = func() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return true
			}
		}
	}
	return false
}()

// libValid is the library's verdict alone (the fast path bypassed).
func libValid(s *Schema, v any) bool {
	if m, ok := v.(map[string]any); ok {
		return s.s.ValidateMap(m).IsValid()
	}
	return s.s.Validate(v).IsValid()
}

// agree compares the fast verdict with the library's. It returns whether
// they agree and whether the fast path said valid.
func agree(t testing.TB, s *Schema, v any, what string) bool {
	t.Helper()
	fast := s.fast.valid(v)
	lib := libValid(s, v)
	if fast != lib {
		b, _ := json.Marshal(v)
		if len(b) > 600 {
			b = append(b[:600], "…"...)
		}
		t.Errorf("%s: fast=%v library=%v for %s", what, fast, lib, b)
		return false
	}
	if !fast && len(s.Validate(v)) == 0 {
		t.Errorf("%s: invalid but Validate reported nothing", what)
	}
	return true
}

// TestFastSchemaBenchAgreement is the differential test over the
// JSONSchemaBench sample: for every schema with a fast path, every object
// instance (and mutations of it) gets the same verdict from both paths.
func TestFastSchemaBenchAgreement(t *testing.T) {
	cases := loadBench(t)
	compiled, fastN := 0, 0
	reasons := map[string]int{}
	var labelled, labelledValidFast, labelledValid, mutants, children int
	rng := rand.New(rand.NewPCG(1, 2))
	perInstance := 12
	if testing.Short() || raceEnabled {
		perInstance = 4
	}
	for _, c := range cases {
		s, err := CompileSchema(c.Schema)
		if err != nil {
			continue
		}
		compiled++
		if s.fast == nil {
			_, why := buildFast(s.libDoc, s.UnknownFormats, s.dialect)
			reasons[bucketReason(why)]++
			continue
		}
		fastN++
		for i, tc := range c.Tests {
			m, ok := objectInstance(tc.Data)
			if !ok {
				continue
			}
			labelled++
			what := fmt.Sprintf("%s#%d", c.ID, i)
			if agree(t, s, m, what) && libValid(s, m) {
				labelledValid++
				labelledValidFast++
			} else if libValid(s, m) {
				labelledValid++
			}
			for k, child := range m {
				children++
				agree(t, s, child, what+" member "+k)
			}
			for j := 0; j < perInstance; j++ {
				mutants++
				agree(t, s, mutate(rng, m), fmt.Sprintf("%s mutant %d", what, j))
			}
		}
	}
	t.Logf("schemas: %d, compiled: %d, with a fast path: %d (%.1f%% of compiled)",
		len(cases), compiled, fastN, 100*float64(fastN)/float64(compiled))
	keys := make([]string, 0, len(reasons))
	for r := range reasons {
		keys = append(keys, r)
	}
	sort.Slice(keys, func(i, j int) bool { return reasons[keys[i]] > reasons[keys[j]] })
	for _, r := range keys {
		t.Logf("  no fast path (%s): %d", r, reasons[r])
	}
	t.Logf("compared: %d labelled object instances (%d valid, all %d accepted by the fast path), %d members, %d mutants",
		labelled, labelledValid, labelledValidFast, children, mutants)
	if fastN < compiled*60/100 {
		t.Errorf("fast path coverage fell to %d of %d schemas", fastN, compiled)
	}
}

// bucketReason groups bail-out reasons for the log.
func bucketReason(why string) string {
	for _, p := range []string{"$ref is not local", "$ref to a named anchor", "$ref does not resolve", "$ref through", "format "} {
		if strings.HasPrefix(why, p) {
			return p
		}
	}
	return why
}

// TestFastSchemaExamples runs every example schema against every sample
// output of its example (strict and lenient extraction).
func TestFastSchemaExamples(t *testing.T) {
	schemas, _ := filepath.Glob("../examples/*/schemas/*.json")
	if len(schemas) == 0 {
		t.Fatal("no example schemas found")
	}
	compared, withFast := 0, 0
	for _, path := range schemas {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := CompileSchema(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if s.fast == nil {
			_, why := buildFast(s.libDoc, s.UnknownFormats, s.dialect)
			t.Logf("%s: no fast path (%s)", path, why)
			continue
		}
		withFast++
		exampleDir := filepath.Dir(filepath.Dir(path))
		samples, _ := filepath.Glob(filepath.Join(exampleDir, "samples", "*", "*"))
		hasText := false
		if props, ok := s.Doc()["properties"].(map[string]any); ok {
			_, hasText = props["text"]
		}
		for _, sp := range samples {
			if !strings.HasSuffix(sp, ".json") && !strings.HasSuffix(sp, ".txt") || filepath.Base(sp) == "expect.json" {
				continue
			}
			content, err := os.ReadFile(sp)
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range []Mode{ModeStrict, ModeLenient} {
				ex, vs := Extract(string(content), mode, Limits{MaxBytes: 1 << 20}, hasText)
				if len(vs) > 0 {
					continue
				}
				compared++
				agree(t, s, ex.Value, fmt.Sprintf("%s on %s (%s)", filepath.Base(path), sp, mode))
			}
		}
	}
	t.Logf("example schemas: %d, with a fast path: %d; instances compared: %d", len(schemas), withFast, compared)
	if withFast < len(schemas)-1 {
		t.Errorf("only %d of %d example schemas have a fast path", withFast, len(schemas))
	}
}

// edgeSubschemas are applied to the member "v" of {"v": value}.
var edgeSubschemas = []string{
	`{"type":"integer"}`,
	`{"type":"number"}`,
	`{"type":["integer","string"]}`,
	`{"type":[]}`,
	`{"type":"null"}`,
	`{"multipleOf":0.1}`,
	`{"multipleOf":3}`,
	`{"multipleOf":1e-3}`,
	`{"multipleOf":0.0001,"minimum":-1e3}`,
	`{"minimum":1,"exclusiveMaximum":1.5}`,
	`{"exclusiveMinimum":0.3,"maximum":12345678901234567890}`,
	`{"minimum":0.30000000000000004}`,
	`{"maximum":-0}`,
	`{"enum":[1,"1",[1.0],{"a":1},null,true]}`,
	`{"enum":["a","b","c","d","e","f","g","h","i","j","é"]}`,
	`{"enum":[]}`,
	`{"const":1.0}`,
	`{"const":{"a":[1,2]}}`,
	`{"const":null}`,
	`{"minLength":2,"maxLength":3}`,
	`{"minLength":1.5,"maxLength":2.9}`,
	`{"maxLength":1e300}`,
	`{"pattern":"^[a-z]+$"}`,
	`{"pattern":"é"}`,
	`{"format":"date-time"}`,
	`{"format":"email"}`,
	`{"format":"int32"}`,
	`{"minItems":1.5,"maxItems":2}`,
	`{"uniqueItems":true}`,
	`{"items":false,"prefixItems":[true],"uniqueItems":true}`,
	`{"prefixItems":[{"type":"integer"}],"items":{"type":"string"}}`,
	`{"items":[{"type":"integer"}],"additionalItems":false}`,
	`{"oneOf":[{"enum":[1,2]},{"enum":[2.0,3]}]}`,
	`{"oneOf":[{"type":"integer"},{"type":"number"}]}`,
	`{"anyOf":[{"type":"string","maxLength":1},{"type":"integer","minimum":2}]}`,
	`{"allOf":[{"minimum":0},{"multipleOf":0.5}]}`,
	`{"not":{"type":"string"}}`,
	`{"if":{"type":"number"},"then":{"minimum":1},"else":{"type":"string"}}`,
	`{"then":{"type":"string"}}`,
	`{"type":"object","minProperties":1,"maxProperties":1.5}`,
	`{"properties":{"a":{"type":"integer"}},"required":["a"]}`,
	`{"patternProperties":{"^a":{"type":"integer"},"b$":{"minimum":2}},"additionalProperties":{"type":"string"}}`,
	`{"properties":{"a":true},"patternProperties":{"^x-":true},"additionalProperties":false}`,
	`{"type":"array","items":{"type":"object","properties":{"a":{"const":1}}}}`,
	`{"dependentRequired":{"a":["b"],"x-c":[]},"dependentSchemas":{"ab":{"required":["xb"]},"c":false}}`,
	`{"dependencies":{"a":["b"],"ab":{"properties":{"xb":{"type":"integer"}}}}}`,
}

// edgeValues are JSON texts put in "v".
var edgeValues = []string{
	`0`, `-0`, `1`, `1.0`, `1.00`, `10e-1`, `1e0`, `1E2`, `0.1`, `0.3`, `0.30000000000000004`,
	`1.5`, `1.4999999999999999999999`, `-1`, `2`, `2.0`, `3`, `0.5`, `12345678901234567890`,
	`12345678901234567891`, `12345678901234567890123`, `1e400`, `1e-400`, `0.1e1`, `100e-2`,
	`9007199254740993`, `1.0000000000000000000000001`, `5e-324`, `-1e3`, `-1000.0001`, `0.001`,
	`1e1000001`, `0.0000000000000000000000000000001`, `3e-1`,
	`""`, `"a"`, `"ab"`, `"abcd"`, `"é"`, `"éé"`, `"日本語"`, `"🎉🎉🎉🎉"`, `"a\u0301"`, `"1"`,
	`"2024-01-02T03:04:05Z"`, `"not a date"`, `"a@b.co"`, `"x-y"`,
	`true`, `false`, `null`,
	`[]`, `[1]`, `[1,1.0]`, `[1,"1"]`, `["a","a"]`, `[{"a":1},{"a":1.0}]`, `[[1],[1.0]]`, `[1,2,3]`,
	`[1,"a"]`, `["a",1]`, `[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,1.0]`,
	`[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21]`,
	`[{"a":1,"b":2},{"b":2,"a":1.0},3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]`,
	`[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,-0]`, `[100,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,1e2]`,
	`["a",1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,[1],{"a":[1]},[1.0]]`,
	`{}`, `{"a":1}`, `{"a":1.0}`, `{"a":"1"}`, `{"a":[1,2]}`, `{"a":[1,2.0]}`, `{"ab":1,"xb":3}`,
	`{"ab":1,"xb":1}`, `{"c":"s"}`, `{"c":1}`, `{"x-c":1}`, `{"a":1,"b":2}`, `[{"a":1}]`, `[{"a":2}]`,
}

// TestFastSchemaEdges crosses edge subschemas with edge values, and checks
// a few verdicts the library's semantics fix.
func TestFastSchemaEdges(t *testing.T) {
	n := 0
	for _, sub := range edgeSubschemas {
		s, err := CompileSchema([]byte(`{"type":"object","properties":{"v":` + sub + `}}`))
		if err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		if s.fast == nil {
			_, why := buildFast(s.libDoc, s.UnknownFormats, s.dialect)
			t.Fatalf("%s: no fast path (%s)", sub, why)
		}
		for _, val := range edgeValues {
			v, err := DecodeJSON([]byte(`{"v":` + val + `}`))
			if err != nil {
				t.Fatalf("%s: %v", val, err)
			}
			n++
			agree(t, s, v, sub+" on "+val)
		}
	}
	t.Logf("%d edge comparisons", n)

	// Verdicts worth pinning (both paths must say so).
	pins := []struct {
		schema, inst string
		valid        bool
	}{
		{`{"properties":{"v":{"type":"integer"}}}`, `{"v":1.0}`, true},
		{`{"properties":{"v":{"type":"integer"}}}`, `{"v":1e2}`, true},
		{`{"properties":{"v":{"type":"integer"}}}`, `{"v":10e-1}`, true},
		{`{"properties":{"v":{"type":"integer"}}}`, `{"v":1.5}`, false},
		{`{"properties":{"v":{"type":"number"}}}`, `{"v":1e1000001}`, false}, // big.Rat refuses: type "unknown"
		{`{"properties":{"v":{"minimum":5}}}`, `{"v":1e-1000001}`, true},     // ...and numeric keywords skip it
		{`{"properties":{"v":{"multipleOf":0.1}}}`, `{"v":0.3}`, true},
		{`{"properties":{"v":{"multipleOf":0.1}}}`, `{"v":0.30000000000000004}`, false},
		{`{"properties":{"v":{"enum":[1]}}}`, `{"v":1.0}`, true},
		{`{"properties":{"v":{"const":{"a":[1]}}}}`, `{"v":{"a":[1.00]}}`, true},
		{`{"properties":{"v":{"maxLength":2}}}`, `{"v":"éé"}`, true},
		{`{"properties":{"v":{"minLength":2}}}`, `{"v":"🎉"}`, false},
		{`{"properties":{"v":{"maxLength":1e300}}}`, `{"v":""}`, false}, // int(1e300) wraps
		{`{"properties":{"v":{"oneOf":[{"enum":[1,2]},{"enum":[2.0,3]}]}}}`, `{"v":2}`, false},
		{`{"properties":{"v":{"uniqueItems":true}}}`, `{"v":[1,1.0]}`, false},
		{`{"properties":{"v":{"type":[]}}}`, `{"v":1}`, true},
		{`{"properties":{"v":{"enum":[]}}}`, `{"v":1}`, false},         // nothing is allowed (dialect.go)
		{`{"properties":{"v":{"format":"int32"}}}`, `{"v":"x"}`, true}, // unknown format: annotation
		// Drafts 4-7 ignore the siblings of $ref.
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"type":"object"}},"$ref":"#/definitions/a","required":["x"]}`, `{}`, true},
		{`{"definitions":{"a":{"type":"object"}},"$ref":"#/definitions/a","required":["x"]}`, `{}`, false},
		// Keyword names are case-sensitive; unknown ones are dropped.
		{`{"properties":{"v":{"Type":"string","MINLENGTH":3,"x-max":1}}}`, `{"v":1}`, true},
		// dependencies: arrays are dependentRequired, schemas dependentSchemas
		// (before 2020-12, and in 2020-12 through dialect.go's 2019-09 entry).
		{`{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":["b"]}}`, `{"a":1}`, false},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":["b"]}}`, `{"a":1,"b":2}`, true},
		{`{"dependencies":{"a":{"required":["b"]}}}`, `{"a":1}`, false},
		{`{"dependencies":{"a":{"required":["b"]}}}`, `{"c":1}`, true},
		{`{"dependentSchemas":{"a":{"properties":{"b":{"type":"string"}}}}}`, `{"a":1,"b":2}`, false},
		{`{"dependentRequired":{"a":["b","c"]}}`, `{"a":1,"b":2}`, false},
		// Each subschema is judged by its declared draft (dialect.go):
		// later keywords are ignored, draft-04 integers have no fraction.
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"type":"integer"}}}`, `{"v":12345.0}`, false},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"type":"integer"}}}`, `{"v":1e2}`, false},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"type":"integer"}}}`, `{"v":12345}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"type":["integer","string"]}}}`, `{"v":1.0}`, false},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"type":["integer","number"]}}}`, `{"v":1.0}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"not":{"type":"integer"}}}}`, `{"v":1.0}`, true},
		{`{"$schema":"http://json-schema.org/draft-06/schema#","properties":{"v":{"type":"integer"}}}`, `{"v":1.0}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","if":{"required":["a"]},"then":{"required":["b"]}}`, `{"a":1}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","if":{"required":["a"]},"then":{"required":["b"]}}`, `{"a":1}`, false},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"const":1}}}`, `{"v":2}`, true},
		{`{"$schema":"http://json-schema.org/draft-06/schema#","properties":{"v":{"const":1}}}`, `{"v":2}`, false},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"v":{"prefixItems":[{"type":"string"}]}}}`, `{"v":[1]}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"v":{"items":[{"type":"string"}]}}}`, `{"v":[1]}`, false},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"v":{"minContains":2,"unevaluatedItems":false,"$defs":{"x":{"type":"string"}}}}}`, `{"v":[1]}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"$schema":"http://json-schema.org/draft-07/schema#","if":{"const":1},"then":false}}}`, `{"v":1}`, false},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"$schema":"http://json-schema.org/draft-06/schema#","const":1}}}`, `{"v":2}`, false},
		// Draft-04 boolean exclusiveMinimum.
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"minimum":1,"exclusiveMinimum":true}}}`, `{"v":1}`, false},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"v":{"minimum":1,"exclusiveMinimum":false}}}`, `{"v":1}`, true},
		// A pointer resolves against the schema holding the $ref first.
		{`{"properties":{"a":{"$defs":{"x":{"type":"string"}},"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"number"}}}`, `{"a":"s"}`, true},
		{`{"properties":{"a":{"$defs":{"x":{"type":"string"}},"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"number"}}}`, `{"a":1}`, false},
		// items as an array is prefixItems, additionalItems is items.
		{`{"properties":{"v":{"items":[{"type":"integer"}],"additionalItems":false}}}`, `{"v":[1,2]}`, false},
		{`{"properties":{"v":{"items":[{"type":"integer"}],"additionalItems":false}}}`, `{"v":[1]}`, true},
		// Recursion through a descending $ref.
		{`{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`, `{"c":[{"c":[]},{"c":[{"c":[{}]}]}]}`, true},
		{`{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`, `{"c":[{"c":[1]}]}`, false},
		{`{"properties":{"c":{"items":{"$ref":"#"}}},"required":["k"]}`, `{"k":1,"c":[{"k":2,"c":[]}]}`, true},
		{`{"properties":{"c":{"items":{"$ref":"#"}}},"required":["k"]}`, `{"k":1,"c":[{"c":[]}]}`, false},
	}
	for _, p := range pins {
		s, err := CompileSchema([]byte(p.schema))
		if err != nil {
			t.Fatalf("%s: %v", p.schema, err)
		}
		if s.fast == nil {
			_, why := buildFast(s.libDoc, s.UnknownFormats, s.dialect)
			t.Fatalf("%s: no fast path (%s)", p.schema, why)
		}
		v, err := DecodeJSON([]byte(p.inst))
		if err != nil {
			t.Fatal(err)
		}
		if got := libValid(s, v); got != p.valid {
			t.Errorf("library: %s on %s = %v, want %v", p.schema, p.inst, got, p.valid)
		}
		if got := s.fast.valid(v); got != p.valid {
			t.Errorf("fast: %s on %s = %v, want %v", p.schema, p.inst, got, p.valid)
		}
	}
}

// TestFastSchemaConcurrent shares one compiled tree between goroutines,
// with numbers that take the big.Rat path (run with -race).
func TestFastSchemaConcurrent(t *testing.T) {
	s, err := CompileSchema([]byte(`{"properties":{"v":{"type":"array","uniqueItems":true,"items":{"enum":[1e30,2.5,1e-30,"a"],"multipleOf":1e-40,"minimum":1e-31,"maximum":12345678901234567890123}}}}`))
	if err != nil || s.fast == nil {
		t.Fatalf("compile: %v, fast %v", err, s.fast != nil)
	}
	var insts []any
	for _, doc := range []string{`{"v":[1e30,2.5]}`, `{"v":[1000000000000000000000000000000,1e30]}`, `{"v":[1e-30,2.50]}`, `{"v":[3]}`} {
		v, err := DecodeJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, v)
	}
	want := make([]bool, len(insts))
	for i, v := range insts {
		want[i] = libValid(s, v)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for k := 0; k < 200; k++ {
				for i, v := range insts {
					if got := s.fast.valid(v); got != want[i] {
						t.Errorf("instance %d: fast %v, library %v", i, got, want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestFastSchemaBailsOut lists schemas that must not get a fast path.
func TestFastSchemaBailsOut(t *testing.T) {
	for _, doc := range []string{
		`{"unevaluatedProperties":false}`,
		`{"properties":{"a":{"contains":{"type":"string"}}}}`,
		`{"propertyNames":{"maxLength":3}}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","dependencies":{"a":["b"]},"dependentRequired":{"c":["d"]}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/dependentSchemas/a","dependencies":{"a":{}}}`,
		`{"$defs":{"a":{"$anchor":"x"}},"$ref":"#x"}`,
		`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"string"}]}},"$ref":"#/$defs/a"}`, // in-place cycle
		`{"properties":{"a":{"type":null}}}`,
		`{"items":[{"type":"string"}],"additionalItems":null}`,
		`{"contentMediaType":"application/json"}`,
	} {
		s, err := CompileSchema([]byte(doc))
		if err != nil {
			continue // the library refuses it: nothing to speed up
		}
		if s.fast != nil {
			t.Errorf("%s: fast path built", doc)
		}
	}
	// Unreachable unsupported keywords do not matter.
	s, err := CompileSchema([]byte(`{"$defs":{"unused":{"propertyNames":{"maxLength":1}}},"type":"object"}`))
	if err != nil || s.fast == nil {
		t.Errorf("unused $defs entry blocked the fast path (err %v)", err)
	}
	// Unknown (extension) keywords are ignored by the library, and here.
	s, err = CompileSchema([]byte(`{"x-thing":{"type":"string"},"type":"object"}`))
	if err != nil || s.fast == nil {
		t.Errorf("extension keyword blocked the fast path (err %v)", err)
	}
}

// mutate returns a deep copy of m with a few random changes: members
// removed, values replaced by edge values, by values from elsewhere in the
// instance, numbers nudged, strings lengthened or shortened, array items
// duplicated.
func mutate(rng *rand.Rand, m map[string]any) map[string]any {
	c := deepCopy(m).(map[string]any)
	var pool []any
	collectValues(c, &pool)
	for k := 0; k < 1+rng.IntN(3); k++ {
		mutateOne(rng, c, pool)
	}
	return c
}

var edgePool = sync.OnceValue(func() []any {
	var out []any
	for _, s := range edgeValues {
		v, err := DecodeJSON([]byte(s))
		if err == nil {
			out = append(out, v)
		}
	}
	return out
})

func mutateOne(rng *rand.Rand, root map[string]any, pool []any) {
	// Pick a random container and a random member of it.
	var containers []any
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			containers = append(containers, t)
			for _, e := range t {
				walk(e)
			}
		case []any:
			containers = append(containers, t)
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(root)
	target := containers[rng.IntN(len(containers))]
	replace := func(old any) any {
		switch rng.IntN(6) {
		case 0:
			e := edgePool()
			return deepCopy(e[rng.IntN(len(e))])
		case 1:
			if len(pool) > 0 {
				return deepCopy(pool[rng.IntN(len(pool))])
			}
		case 2:
			if n, ok := old.(json.Number); ok {
				nudges := []string{"0", ".0", "1", "e0", "00001"}
				return json.Number(string(n) + nudges[rng.IntN(len(nudges))])
			}
		case 3:
			if s, ok := old.(string); ok {
				if len(s) > 0 && rng.IntN(2) == 0 {
					return s[:len(s)-1]
				}
				return s + []string{"x", "é", "🎉", " "}[rng.IntN(4)]
			}
		case 4:
			if a, ok := old.([]any); ok && len(a) > 0 {
				return append(slices.Clone(a), deepCopy(a[rng.IntN(len(a))]))
			}
		}
		e := edgePool()
		return deepCopy(e[rng.IntN(len(e))])
	}
	switch t := target.(type) {
	case map[string]any:
		if len(t) == 0 {
			t["extra"] = replace(nil)
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(5) {
		case 0:
			delete(t, k)
		case 1:
			t[k+"_extra"] = replace(t[k])
		default:
			t[k] = replace(t[k])
		}
	case []any:
		if len(t) == 0 {
			return
		}
		i := rng.IntN(len(t))
		t[i] = replace(t[i])
	}
}

func collectValues(v any, out *[]any) {
	*out = append(*out, v)
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			collectValues(e, out)
		}
	case []any:
		for _, e := range t {
			collectValues(e, out)
		}
	}
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(t))
		for k, e := range t {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

// fuzzSchemas exercise every supported keyword.
var fuzzSchemas = []string{
	BenchSchema,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":-5,"exclusiveMaximum":1e2,"multipleOf":0.5},"x":{"type":"number","multipleOf":0.01,"exclusiveMinimum":-1.5,"maximum":12345678901234567890},"s":{"type":"string","minLength":2,"maxLength":4,"pattern":"^[a-zé🎉]*$"},"d":{"format":"date-time"},"e":{"format":"email"}},"required":["n"]}`,
	`{"type":"object","properties":{"a":{"type":"array","items":{"enum":[1,"1",1.5,null,true,{"k":[1]},[2]]},"uniqueItems":true,"minItems":1,"maxItems":4}},"patternProperties":{"^p":{"type":["string","null"]},"q$":{"const":{"z":1}}},"additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","properties":{"v":{"oneOf":[{"type":"integer"},{"type":"number","minimum":0},{"enum":[1,2.5,"a"]}]},"w":{"anyOf":[{"type":"string","maxLength":1},{"not":{"type":"number"}}]},"u":{"allOf":[{"type":"number"},{"multipleOf":3}]}},"minProperties":1,"maxProperties":4}`,
	`{"type":"object","if":{"properties":{"kind":{"const":"a"}},"required":["kind"]},"then":{"required":["a"],"properties":{"a":{"type":"integer"}}},"else":{"properties":{"b":{"type":"string"}}}}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"t":{"type":"object","properties":{"p":{"type":"array","items":[{"type":"string"},{"type":"number"}],"additionalItems":false}}}},"$ref":"#/definitions/t","required":["never"]}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"m":{"type":"number","minimum":0,"exclusiveMinimum":true,"maximum":1,"exclusiveMaximum":false},"t":{"type":["array","object"],"prefixItems":[{"const":0}],"items":false,"uniqueItems":true}}}`,
	// Dialects: draft-04 integers, keywords of later drafts ignored, a
	// subschema declaring its own draft, an empty enum.
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"i":{"type":"integer","maximum":100},"j":{"type":["integer","null"],"multipleOf":2},"k":{"not":{"type":"integer"}},"c":{"const":1},"e":{"enum":[]},"d":{"$schema":"http://json-schema.org/draft-07/schema#","if":{"type":"integer"},"then":{"const":3}}},"if":{"required":["i"]},"then":false}`,
}

var compiledFuzzSchemas = sync.OnceValues(func() ([]*Schema, error) {
	out := make([]*Schema, len(fuzzSchemas))
	for i, doc := range fuzzSchemas {
		s, err := CompileSchema([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("fuzz schema %d: %w", i, err)
		}
		if s.fast == nil {
			_, why := buildFast(s.libDoc, s.UnknownFormats, s.dialect)
			return nil, fmt.Errorf("fuzz schema %d: no fast path (%s)", i, why)
		}
		out[i] = s
	}
	return out, nil
})

// FuzzFastSchemaAgrees: for any object instance, fast and library verdicts
// are equal.
func FuzzFastSchemaAgrees(f *testing.F) {
	seeds := []string{
		BenchOutput,
		`{"n":1.0,"x":0.07,"s":"éé","d":"2024-01-02T03:04:05Z","e":"a@b.co"}`,
		`{"n":-5,"x":12345678901234567890,"s":"🎉🎉🎉🎉"}`,
		`{"n":99.5,"x":-1.49}`,
		`{"a":[1,"1",1.0],"p1":null,"xq":{"z":1.0},"other":true}`,
		`{"a":[{"k":[1]},[2.0]],"pq":"s"}`,
		`{"v":2,"w":"ab","u":3.0}`,
		`{"v":2.5,"w":"a","u":6e0}`,
		`{"kind":"a","a":1e0}`,
		`{"kind":"b","b":"x"}`,
		`{"v":1,"kids":[{"v":2,"kids":[{"v":3.0}]}]}`,
		`{"p":["a",1,2]}`,
		`{"m":1e-400,"t":[0,0]}`,
		`{"m":0,"t":{}}`,
		`{"i":1.0,"j":2e0,"k":1.0,"c":2,"d":3.0}`,
		`{"i":12345,"j":null,"k":1,"d":4,"e":1}`,
	}
	for i := range fuzzSchemas {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		schemas, err := compiledFuzzSchemas()
		if err != nil {
			t.Fatal(err)
		}
		v, err := DecodeJSON(data)
		if err != nil {
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		s := schemas[int(which)%len(schemas)]
		agree(t, s, m, fmt.Sprintf("fuzz schema %d", int(which)%len(schemas)))
	})
}

func TestFastSchemaFuzzSchemasCompile(t *testing.T) {
	if _, err := compiledFuzzSchemas(); err != nil {
		t.Fatal(err)
	}
}

// benchOutputInvalid is the bench output with its confidence out of range.
var benchOutputInvalid = strings.Replace(BenchOutput, `"confidence":0.12`, `"confidence":1.12`, 1)

// benchFastSetup compiles the bench schema (which must get a fast path)
// and decodes out, and has b report out's bytes and the allocations per
// validation.
func benchFastSetup(b *testing.B, out string) (*Schema, map[string]any) {
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	s, err := CompileSchema([]byte(BenchSchema))
	if err != nil {
		b.Fatal(err)
	}
	if s.fast == nil {
		b.Fatal("no fast path for the bench schema")
	}
	v, err := DecodeJSON([]byte(out))
	if err != nil {
		b.Fatal(err)
	}
	return s, v.(map[string]any)
}

// BenchmarkFastValidate: the fast path alone on the valid bench output.
func BenchmarkFastValidate(b *testing.B) {
	s, m := benchFastSetup(b, BenchOutput)
	for b.Loop() {
		if !s.fast.valid(m) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkLibraryValidate: the library path alone (as before the fast path).
func BenchmarkLibraryValidate(b *testing.B) {
	s, m := benchFastSetup(b, BenchOutput)
	for b.Loop() {
		if vs := s.validateLibrary(m); len(vs) != 0 {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkSchemaValidateInvalid: Schema.Validate on an invalid output,
// where the fast path runs first and the library after it.
func BenchmarkSchemaValidateInvalid(b *testing.B) {
	s, m := benchFastSetup(b, benchOutputInvalid)
	for b.Loop() {
		if vs := s.Validate(m); len(vs) == 0 {
			b.Fatal("valid")
		}
	}
}

// BenchmarkFastValidateInvalid: the fast path alone on the invalid output
// (what an invalid output pays before the library runs).
func BenchmarkFastValidateInvalid(b *testing.B) {
	s, m := benchFastSetup(b, benchOutputInvalid)
	for b.Loop() {
		if s.fast.valid(m) {
			b.Fatal("valid")
		}
	}
}

// objectInstance decodes a labelled instance as a contract output would be
// decoded, and reports whether it is an object (the only outputs a
// contract accepts).
func objectInstance(data []byte) (map[string]any, bool) {
	v, err := DecodeJSON(data)
	if err != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// TestFastSchemaKeywordTypes: a keyword of keywordTypes with a value of
// another type poisons its node with "<keyword> is not <type>", and one of
// the type is read by buildObject's case (which asserts it) without a panic.
func TestFastSchemaKeywordTypes(t *testing.T) {
	right := map[string]string{"a string": `"x"`, "a boolean": `true`, "an array": `[]`, "an object": `{}`}
	for k, want := range keywordTypes {
		for _, wrong := range []string{`1`, `"x"`, `true`, `[]`, `{}`} {
			if wrong == right[want] {
				continue
			}
			_, why := buildFast([]byte(`{"`+k+`":`+wrong+`}`), nil, dialect2020)
			if w := k + " is not " + want; why != w {
				t.Errorf("%s: %s: reason %q, want %q", k, wrong, why, w)
			}
		}
		if _, why := buildFast([]byte(`{"`+k+`":`+right[want]+`}`), nil, dialect2020); strings.Contains(why, " is not ") {
			t.Errorf("%s: %s: reason %q", k, right[want], why)
		}
	}
}

// FuzzShortNumAgrees: a number parseShortNum reads gets the value
// parseLongNum gives it.
func FuzzShortNumAgrees(f *testing.F) {
	for _, s := range []string{"0", "-0", "0.0", "-0.50", "1", "10", "100", "0.82", "1460", "-12.3400", "9999999999999999999",
		"-999999999999999999.9", "01", "1.", ".5", "-", "", "1e2", "0.0000000000000000001", "12345678901234567890", "1.5x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseShortNum(s)
		if !ok {
			return
		}
		if want, wok := parseLongNum(s); !wok || got != want {
			t.Fatalf("%q: short %+v, long %+v (%v)", s, got, want, wok)
		}
	})
}
