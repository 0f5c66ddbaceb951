package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/contractd/contractd/internal/testkit/golden"
)

// A package-unique flag name: other test files in this package may define
// their own -update.
var updateExtractGolden = flag.Bool("update-extract", false, "rewrite testdata/extract/*.golden.json")

type extractCase struct {
	name    string
	in      string
	mode    Mode
	lim     Limits
	hasText bool
	want    string // the accepted JSON, exactly; "" when rejected
	rule    string // the single parse rule when rejected
	msg     string // a substring of the violation message, optional
}

var extractModes = []Mode{ModeStrict, ModeLenient, ModeRepair}

func extractDeepObject(n int) string {
	return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
}

func TestExtract(t *testing.T) {
	var cases []extractCase
	// The same verdict in every mode.
	for _, m := range extractModes {
		cases = append(cases,
			extractCase{name: "empty", in: "", mode: m, rule: RuleEmptyOutput},
			extractCase{name: "whitespace", in: " \n\t\r\u00a0", mode: m, rule: RuleEmptyOutput},
			extractCase{name: "too large", in: `{"a":"0123456789"}`, mode: m, lim: Limits{MaxBytes: 10}, rule: RuleTooLarge, msg: "18 bytes"},
			extractCase{name: "at the size limit", in: `{"a":1}`, mode: m, lim: Limits{MaxBytes: 7}, want: `{"a":1}`},
			extractCase{name: "too large beats empty", in: strings.Repeat(" ", 11), mode: m, lim: Limits{MaxBytes: 10}, rule: RuleTooLarge},
			extractCase{name: "invalid utf8", in: "{\"a\":\"\xff\"}", mode: m, rule: RuleInvalidUTF8, msg: "byte 6"},
			extractCase{name: "invalid utf8 in prose", in: "Sure \xc3( {\"a\":1}", mode: m, rule: RuleInvalidUTF8},
			extractCase{name: "lone surrogate", in: `{"a":"\ud800"}`, mode: m, rule: RuleInvalidUTF8},
			extractCase{name: "object", in: " \n{\"a\": 1.50, \"b\": [true, null, \"x\"]}\n ", mode: m, want: `{"a": 1.50, "b": [true, null, "x"]}`},
			extractCase{name: "duplicate key at depth", in: `{"a":{"b":[{"c":1,"c":2}]}}`, mode: m, rule: RuleDuplicateKey, msg: `"c" at /a/b/0/c`},
			extractCase{name: "duplicate key escaped", in: `{"x/y~":1,"x/y~":2}`, mode: m, rule: RuleDuplicateKey, msg: "/x~1y~0"},
			extractCase{name: "duplicate after escapes", in: `{"a":1,"\u0061":2}`, mode: m, rule: RuleDuplicateKey},
			extractCase{name: "deep array", in: strings.Repeat("[", 10000), mode: m, rule: RuleTooDeep},
			extractCase{name: "deep closed array", in: strings.Repeat("[", 10000) + strings.Repeat("]", 10000), mode: m, rule: RuleTooDeep},
			extractCase{name: "deep object", in: extractDeepObject(10000), mode: m, rule: RuleTooDeep, msg: "64 levels"},
			extractCase{name: "deep object unclosed", in: strings.Repeat(`{"a":`, 10000), mode: m, rule: RuleTooDeep},
			extractCase{name: "max depth", in: extractDeepObject(3), mode: m, lim: Limits{MaxDepth: 3}, want: extractDeepObject(3)},
			extractCase{name: "over max depth", in: `{"a":{"b":[1]}}`, mode: m, lim: Limits{MaxDepth: 2}, rule: RuleTooDeep, msg: "at /a/b"},
			extractCase{name: "default depth", in: extractDeepObject(DefaultMaxDepth), mode: m, want: extractDeepObject(DefaultMaxDepth)},
			extractCase{name: "scalar", in: `"just a string"`, mode: m, rule: RuleTopLevelNotObj, msg: "string"},
			extractCase{name: "number", in: `42`, mode: m, rule: RuleTopLevelNotObj, msg: "number"},
			extractCase{name: "null", in: `null`, mode: m, rule: RuleTopLevelNotObj},
			extractCase{name: "array", in: `[1, 2]`, mode: m, rule: RuleTopLevelNotObj, msg: "array"},
			extractCase{name: "prose", in: "I cannot help with that.", mode: m, rule: RuleNotJSON},
			extractCase{name: "prose with braces", in: "Use {name} and {age}.", mode: m, rule: RuleNotJSON},
			extractCase{name: "numbers kept exactly", in: `{"n": 12345678901234567890.000, "e": -1E+2}`, mode: m, want: `{"n": 12345678901234567890.000, "e": -1E+2}`},
			extractCase{name: "wrapper shape kept when declared", in: `{"text": "{\"a\":1}"}`, mode: m, hasText: true, want: `{"text": "{\"a\":1}"}`},
		)
	}
	cases = append(cases,
		// strict: each failure classified.
		extractCase{name: "fence", in: "```json\n{\"a\":1}\n```", mode: ModeStrict, rule: RuleMarkdownFence},
		extractCase{name: "bare fence", in: "```\n{\"a\":1}\n```", mode: ModeStrict, rule: RuleMarkdownFence},
		extractCase{name: "prose then fence", in: "Here it is:\n```json\n{\"a\":1}\n```", mode: ModeStrict, rule: RuleMarkdownFence},
		extractCase{name: "prose before", in: `Sure! {"a":1}`, mode: ModeStrict, rule: RuleProseAroundJSON},
		extractCase{name: "prose after", in: "{\"a\":1}\nHope this helps!", mode: ModeStrict, rule: RuleProseAroundJSON, msg: "byte 7"},
		extractCase{name: "two objects", in: `{"a":1}{"b":2}`, mode: ModeStrict, rule: RuleProseAroundJSON},
		extractCase{name: "prose around duplicate", in: `Sure: {"a":1,"a":2}`, mode: ModeStrict, rule: RuleProseAroundJSON},
		extractCase{name: "trailing comma", in: `{"a":1,}`, mode: ModeStrict, rule: RuleNotJSON, msg: "byte 6"},
		extractCase{name: "truncated", in: `{"a": [1, 2`, mode: ModeStrict, rule: RuleNotJSON},
		extractCase{name: "truncated array", in: `[{"a":1}`, mode: ModeStrict, rule: RuleNotJSON},
		extractCase{name: "bom", in: "\ufeff{\"a\":1}", mode: ModeStrict, rule: RuleProseAroundJSON},
		extractCase{name: "strict keeps wrapper", in: `{"text": "{\"a\":1}"}`, mode: ModeStrict, want: `{"text": "{\"a\":1}"}`},
		extractCase{name: "fence without json", in: "```\nhello\n```", mode: ModeStrict, rule: RuleNotJSON},

		// lenient: what it takes, in order.
		extractCase{name: "fence", in: "```json\n{\"a\":1}\n```", mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "inline fence", in: "```json {\"a\":1}```", mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "unclosed fence", in: "```json\n{\"a\":1}\n", mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "fence before earlier prose object", in: "Like {\"x\":0}:\n```json\n{\"a\":1}\n```", mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "fence with ``` in a string", in: "```json\n{\"a\":\"```\"}\n```", mode: ModeLenient, want: `{"a":"` + "```" + `"}`},
		extractCase{name: "fence inside a string of the object", in: "{\"code\": \"```json\\n{\\\"x\\\":1}\\n```\"}", mode: ModeLenient, want: "{\"code\": \"```json\\n{\\\"x\\\":1}\\n```\"}"},
		extractCase{name: "prose before", in: `Sure! {"a":1}`, mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "prose after", in: "{\"a\":1}\nHope this helps!", mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "prose with quotes", in: `He said "hi". Then {"a":"}{"} and more`, mode: ModeLenient, want: `{"a":"}{"}`},
		extractCase{name: "nested and braces in strings", in: `Result: {"a":{"b":"} {\"x"},"c":[{"d":1}]} done {"e":2}`, mode: ModeLenient, want: `{"a":{"b":"} {\"x"},"c":[{"d":1}]}`},
		extractCase{name: "unparseable braces skipped", in: `Fill {name} in: {"a":1}`, mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "unparseable span skipped whole", in: `{broken {"a":1}} then {"b":2}`, mode: ModeLenient, want: `{"b":2}`},
		extractCase{name: "inside unclosed brace", in: `Note { see {"a":1}`, mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "array holding an object", in: `[{"a":1}]`, mode: ModeLenient, rule: RuleTopLevelNotObj},
		extractCase{name: "array then prose", in: `[1] and {"a":1}`, mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "string holding an object", in: `"{\"a\":1}"`, mode: ModeLenient, rule: RuleTopLevelNotObj},
		extractCase{name: "prose around duplicate", in: `Sure: {"a":1,"a":2}`, mode: ModeLenient, rule: RuleDuplicateKey},
		extractCase{name: "fenced duplicate", in: "```json\n{\"a\":{\"b\":1,\"b\":2}}\n```", mode: ModeLenient, rule: RuleDuplicateKey, msg: "/a/b"},
		extractCase{name: "duplicate then clean", in: `{"a":1,"a":2} or rather {"a":1}`, mode: ModeLenient, rule: RuleDuplicateKey},
		extractCase{name: "prose duplicate then clean", in: `First {"a":1,"a":2} then {"a":1}`, mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "deep in prose", in: "Here: " + extractDeepObject(100), mode: ModeLenient, rule: RuleTooDeep},
		extractCase{name: "trailing comma", in: `{"a":1,}`, mode: ModeLenient, rule: RuleNotJSON},
		extractCase{name: "fenced array", in: "```json\n[1]\n```", mode: ModeLenient, rule: RuleTopLevelNotObj},
		extractCase{name: "wrapper", in: `{"text": "{\"a\":1}"}`, mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "wrapper with fence", in: `{"text": "` + "```json\\n{\\\"a\\\":1}\\n```" + `"}`, mode: ModeLenient, want: `{"a":1}`},
		extractCase{name: "wrapper with prose", in: `{"text": "Sure: {\"a\":{\"b\":2}} ok"}`, mode: ModeLenient, want: `{"a":{"b":2}}`},
		extractCase{name: "wrapper of prose", in: `{"text": "hello"}`, mode: ModeLenient, rule: RuleNotJSON},
		extractCase{name: "wrapper of array", in: `{"text": "[1]"}`, mode: ModeLenient, rule: RuleTopLevelNotObj},
		extractCase{name: "wrapper empty", in: `{"text": " "}`, mode: ModeLenient, rule: RuleEmptyOutput},
		extractCase{name: "wrapper applied once", in: `{"text": "{\"text\": \"{\\\"a\\\":1}\"}"}`, mode: ModeLenient, want: `{"text": "{\"a\":1}"}`},
		extractCase{name: "wrapper declared", in: `{"text": "{\"a\":1}"}`, mode: ModeLenient, hasText: true, want: `{"text": "{\"a\":1}"}`},
		extractCase{name: "not a wrapper: two keys", in: `{"text": "{\"a\":1}", "b": 2}`, mode: ModeLenient, want: `{"text": "{\"a\":1}", "b": 2}`},
		extractCase{name: "not a wrapper: not a string", in: `{"text": {"a":1}}`, mode: ModeLenient, want: `{"text": {"a":1}}`},

		// repair: lenient first, then the library on what failed to parse.
		extractCase{name: "trailing comma", in: `{"a":1,}`, mode: ModeRepair, want: `{"a":1}`},
		extractCase{name: "single quotes", in: `{'a': 'x', b: 2}`, mode: ModeRepair, want: `{"a": "x", "b": 2}`},
		extractCase{name: "unclosed brackets", in: `{"a": [1, 2`, mode: ModeRepair, want: `{"a": [1, 2]}`},
		extractCase{name: "truncated in prose", in: `Here you go: {"a": {"b": "x`, mode: ModeRepair, want: `{"a": {"b": "x"}}`},
		extractCase{name: "broken in fence", in: "```json\n{\"a\": 1,}\n```", mode: ModeRepair, want: `{"a": 1}`},
		extractCase{name: "broken in prose", in: "Answer: {a: 1} thanks", mode: ModeRepair, want: `{"a": 1}`},
		extractCase{name: "clean candidate beats repair", in: `Example {a: 1}. Answer: {"x": 2}`, mode: ModeRepair, want: `{"x": 2}`},
		extractCase{name: "prose is not repaired", in: "Sorry, I can't help with that.", mode: ModeRepair, rule: RuleNotJSON},
		extractCase{name: "repaired array", in: `[1, 2,`, mode: ModeRepair, rule: RuleTopLevelNotObj},
		extractCase{name: "repaired duplicate", in: `{'a': 1, 'a': 2,}`, mode: ModeRepair, rule: RuleDuplicateKey},
		extractCase{name: "repair keeps depth", in: strings.Repeat(`{"a":`, 100), mode: ModeRepair, rule: RuleTooDeep},
		extractCase{name: "too big to repair", in: `{"a":"` + strings.Repeat("x", maxRepairBytes) + `",}`, mode: ModeRepair, rule: RuleNotJSON},
		extractCase{name: "wrapper of broken", in: `{"text": "{'a': 1,}"}`, mode: ModeRepair, want: `{"a": 1}`},
	)
	for _, tc := range cases {
		t.Run(string(tc.mode)+"/"+tc.name, func(t *testing.T) {
			ex, vs := Extract(tc.in, tc.mode, tc.lim, tc.hasText)
			checkExtracted(t, tc.in, tc.mode, ex, vs)
			if tc.want != "" {
				if len(vs) != 0 || string(ex.JSON) != tc.want {
					t.Fatalf("got %q %v, want %q", ex.JSON, vs, tc.want)
				}
				return
			}
			if len(vs) != 1 || vs[0].Rule != tc.rule || !strings.Contains(vs[0].Message, tc.msg) {
				t.Fatalf("got %q %+v, want one %s violation mentioning %q", ex.JSON, vs, tc.rule, tc.msg)
			}
		})
	}
}

var extractParseRules = map[string]bool{
	RuleEmptyOutput: true, RuleNotJSON: true, RuleMarkdownFence: true, RuleProseAroundJSON: true,
	RuleTopLevelNotObj: true, RuleDuplicateKey: true, RuleInvalidUTF8: true, RuleTooDeep: true, RuleTooLarge: true,
}

// checkExtracted asserts Extract's invariants on any input: exactly one
// meaningful result; violations are well-formed parse violations; an
// accepted object's JSON decodes (by us and by encoding/json) to its Value.
func checkExtracted(t testing.TB, in string, mode Mode, ex Extracted, vs []Violation) {
	t.Helper()
	if len(vs) > 0 {
		if ex.JSON != nil || ex.Value != nil {
			t.Fatalf("both a result and violations: %q %v", ex.JSON, vs)
		}
		for _, v := range vs {
			if v.Kind != KindParse || v.Path != "" || !extractParseRules[v.Rule] || v.Message == "" {
				t.Fatalf("malformed violation %+v", v)
			}
		}
		return
	}
	if ex.JSON == nil || ex.Value == nil {
		t.Fatalf("neither a result nor violations")
	}
	m, viol := decodeObject(ex.JSON, 1<<20)
	if viol != nil {
		t.Fatalf("accepted JSON %q does not decode: %v", ex.JSON, viol)
	}
	if !reflect.DeepEqual(m, ex.Value) {
		t.Fatalf("JSON %q decodes to %v, Value is %v", ex.JSON, m, ex.Value)
	}
	d := json.NewDecoder(bytes.NewReader(ex.JSON))
	d.UseNumber()
	var std map[string]any
	if err := d.Decode(&std); err != nil || d.More() {
		t.Fatalf("encoding/json rejects accepted %q: %v", ex.JSON, err)
	}
	if !reflect.DeepEqual(std, ex.Value) {
		t.Fatalf("encoding/json decodes %q to %v, we to %v", ex.JSON, std, ex.Value)
	}
	if mode == ModeStrict {
		if tr, _ := trimWS(in); string(ex.JSON) != tr {
			t.Fatalf("strict JSON %q is not the trimmed input", ex.JSON)
		}
	}
}

// Extracted.JSON is the object's exact bytes, a copy: it is a substring of
// the input and owns its memory.
func TestExtractExactBytes(t *testing.T) {
	in := "Sure:\n```json\n{ \"a\" : 1.0e0 ,\"b\":\"\\u00e9\"\t}\n```\nbye"
	for _, m := range []Mode{ModeLenient, ModeRepair} {
		ex, vs := Extract(in, m, Limits{}, false)
		if len(vs) != 0 || string(ex.JSON) != "{ \"a\" : 1.0e0 ,\"b\":\"\\u00e9\"\t}" {
			t.Fatalf("%s: %q %v", m, ex.JSON, vs)
		}
		if ex.Value["a"] != json.Number("1.0e0") || ex.Value["b"] != "é" {
			t.Fatalf("%s: value %v", m, ex.Value)
		}
	}
	buf := []byte(`{"a":1}`)
	ex, _ := Extract(string(buf), ModeStrict, Limits{}, false)
	buf[2] = 'X'
	ex.JSON[2] = 'Y'
	if string(buf) != `{"X":1}` || string(ex.JSON) != `{"Y":1}` {
		t.Fatal("Extracted.JSON aliases memory")
	}
}

// Huge inputs are decided without quadratic work or deep recursion.
func TestExtractHuge(t *testing.T) {
	big := `{"a":"` + strings.Repeat("x", 10<<20) + `"}`
	for _, m := range extractModes {
		if _, vs := Extract(big, m, Limits{MaxBytes: 1 << 20}, false); len(vs) != 1 || vs[0].Rule != RuleTooLarge {
			t.Fatalf("%s: %v", m, vs)
		}
	}
	for _, in := range []string{
		strings.Repeat("[", 10<<20),
		strings.Repeat(`{"a":`, 2<<20),
		strings.Repeat("{", 1<<20),
		"x" + strings.Repeat("{", 1<<20) + strings.Repeat("}", 1<<20),
		"x" + strings.Repeat(`{"{"`, 1<<18),
	} {
		for _, m := range extractModes {
			if _, vs := Extract(in, m, Limits{}, false); len(vs) != 1 || (vs[0].Rule != RuleTooDeep && vs[0].Rule != RuleNotJSON) {
				t.Fatalf("%s on %q…: %v", m, in[:10], vs)
			}
		}
	}
}

func TestDecodeObject(t *testing.T) {
	m, viol := decodeObject([]byte(` {"a":[1,{"b":null}],"c":"d"} `), 0)
	want := map[string]any{"a": []any{json.Number("1"), map[string]any{"b": nil}}, "c": "d"}
	if viol != nil || !reflect.DeepEqual(m, want) {
		t.Fatalf("%v %v", m, viol)
	}
	for in, rule := range map[string]string{
		`{"a":1} x`:                RuleNotJSON,
		`{"a":1} {}`:               RuleNotJSON,
		`[]`:                       RuleTopLevelNotObj,
		`{"a":[{"b":1,"b":1}]}`:    RuleDuplicateKey,
		"{\"a\":\"\xff\"}":         RuleInvalidUTF8,
		`{"a":{"a":{"a":{}}}}`:     RuleTooDeep,
		``:                         RuleNotJSON,
		`{"a" 1}`:                  RuleNotJSON,
		`{"a":[1,2,{"x":[[[]]]}]}`: RuleTooDeep,
	} {
		if _, viol := decodeObject([]byte(in), 3); viol == nil || viol.Rule != rule || viol.Kind != KindParse {
			t.Errorf("%q: %+v, want %s", in, viol, rule)
		}
	}
	if _, viol := decodeObject([]byte(`{"a":[1,2,{"x":[[[]]]}]}`), 3); !strings.HasSuffix(viol.Message, "at /a/2/x") {
		t.Errorf("too_deep pointer: %s", viol.Message)
	}
}

func TestScanObjects(t *testing.T) {
	for in, want := range map[string]string{
		`a {b} c {d {e} f} {g`: "{b}|{d {e} f}",
		`{x {y} {z}`:           "{y}|{z}",
		`{"}" {a}}`:            `{"}" {a}}`,
		`"{a}" {b}`:            `{a}|{b}`, // quotes in prose are not strings
		`{"a\"}" } {b}`:        `{"a\"}" }|{b}`,
		`{ {"x": "}"} `:        `{"x": "}"}`,
		`}}} {a}`:              "{a}",
		`{a {b {c} d`:          "{c}",
	} {
		var got []string
		scanObjects(in, func(s, e int) bool { got = append(got, in[s:e]); return true })
		if strings.Join(got, "|") != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// Golden files: each testdata/extract/NAME.txt is extracted in every mode
// (without a declared "text" property) and compared with NAME.golden.json.
func TestExtractGolden(t *testing.T) {
	type result struct {
		JSON       *string     `json:"json"`
		Violations []Violation `json:"violations"`
	}
	golden.Each(t, filepath.Join("testdata", "extract", "*.txt"), func(t *testing.T, in string, content []byte) {
		got := map[Mode]result{}
		for _, m := range extractModes {
			ex, vs := Extract(string(content), m, Limits{MaxBytes: 65536}, false)
			checkExtracted(t, string(content), m, ex, vs)
			r := result{Violations: vs}
			if vs == nil {
				s := string(ex.JSON)
				r.JSON = &s
			}
			got[m] = r
		}
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		golden.Check(t, strings.TrimSuffix(in, ".txt")+".golden.json", b, *updateExtractGolden, "-update-extract")
	})
}

// A ~1.5 KB nested object, the size of a typical classification reply.
var extractBenchObject = func() string {
	item := `{"id": 12345, "label": "billing", "confidence": 0.9231, "evidence": ["I was charged twice", "refund"], "flags": {"urgent": false, "vip": true, "lang": "en"}}`
	return `{"summary": "The customer reports a duplicate charge on the last invoice and asks for a refund.", "items": [` +
		strings.Repeat(item+", ", 7) + item + `], "meta": {"model": "gpt-4o-mini", "version": 3, "tags": ["a", "b", "c"], "nested": {"x": {"y": {"z": [1, 2, 3]}}}}}`
}()

func BenchmarkExtractStrict(b *testing.B) {
	b.SetBytes(int64(len(extractBenchObject)))
	b.ReportAllocs()
	for b.Loop() {
		if _, vs := Extract(extractBenchObject, ModeStrict, Limits{MaxBytes: 65536}, false); vs != nil {
			b.Fatal(vs)
		}
	}
}

// For comparison: encoding/json decoding the same object into any.
func BenchmarkExtractStrictBaselineEncodingJSON(b *testing.B) {
	b.SetBytes(int64(len(extractBenchObject)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeJSON([]byte(extractBenchObject)); err != nil {
			b.Fatal(err)
		}
	}
}

// For comparison: kaptinlin/jsonschema's own decode of an instance (json v2
// into any, numbers as json.Number through an unmarshaler).
func BenchmarkExtractStrictBaselineJSONSchema(b *testing.B) {
	opts := jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(d *jsontext.Decoder, v *any) error {
		if d.PeekKind() != '0' {
			return errors.ErrUnsupported
		}
		raw, err := d.ReadValue()
		*v = json.Number(raw)
		return err
	}))
	b.SetBytes(int64(len(extractBenchObject)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := jsonv2.Unmarshal([]byte(extractBenchObject), &v, opts); err != nil {
			b.Fatal(err)
		}
	}
}
