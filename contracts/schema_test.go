package contracts

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func mustSchema(t testing.TB, doc string) *Schema {
	t.Helper()
	s, err := CompileSchema([]byte(doc))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return s
}

func mustValue(t testing.TB, doc string) any {
	t.Helper()
	v, err := DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatalf("decode %s: %v", doc, err)
	}
	return v
}

// rules renders violations as "path rule" for compact table assertions.
func rules(vs []Violation) []string {
	out := []string{}
	for _, v := range SortViolations(vs) {
		out = append(out, v.Path+" "+v.Rule)
	}
	return out
}

const guardian = `{"type":"object","additionalProperties":false,
 "required":["verdict","reasons","required_actions","risk_level"],
 "properties":{"verdict":{"enum":["PASS","FAIL","RETRY"]},"reasons":{"type":"array","items":{"type":"string"}},
  "required_actions":{"type":"array","items":{"type":"string"}},"risk_level":{"enum":["low","med","high"]}},
 "if":{"properties":{"verdict":{"const":"PASS"}},"required":["verdict"]},
 "then":{"properties":{"required_actions":{"maxItems":0}}},
 "else":{"properties":{"reasons":{"minItems":1}}}}`

func TestSchemaViolations(t *testing.T) {
	tests := []struct {
		name, schema, instance string
		want                   []string
	}{
		{"valid", guardian, `{"verdict":"PASS","reasons":[],"required_actions":[],"risk_level":"low"}`, []string{}},
		{"then branch applies: failing keyword inside then", guardian,
			`{"verdict":"PASS","reasons":[],"required_actions":["RETRIEVE_DB"],"risk_level":"low"}`,
			[]string{"/required_actions maxItems"}},
		{"failing if is not a violation; else branch reports", guardian,
			`{"verdict":"FAIL","reasons":[],"required_actions":[],"risk_level":"low"}`,
			[]string{"/reasons minItems"}},
		{"required: one violation per missing member at the object", guardian,
			`{"verdict":"FAIL","reasons":["x"]}`,
			[]string{" required", " required"}},
		{"additionalProperties points at each extra member", guardian,
			`{"verdict":"FAIL","reasons":["x"],"required_actions":[],"risk_level":"low","zz":1,"a/b":2}`,
			[]string{"/a~1b additionalProperties", "/zz additionalProperties"}},
		{"enum and type at depth", `{"type":"object","properties":{"l":{"type":"array","items":{"enum":["x","y"]}},"n":{"type":"integer"}}}`,
			`{"l":["x","z","y","q"],"n":1.5}`,
			[]string{"/l/1 enum", "/l/3 enum", "/n type"}},
		{"oneOf reports itself, not its branches", `{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`,
			`{"a":1,"b":2}`, []string{" oneOf"}},
		{"anyOf reports itself", `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
			`{"v":true}`, []string{"/v anyOf"}},
		{"not", `{"type":"object","not":{"required":["plan"]}}`, `{"plan":{}}`, []string{" not"}},
		{"$defs via $ref", `{"type":"object","properties":{"p":{"$ref":"#/$defs/pos"}},"$defs":{"pos":{"type":"number","minimum":0}}}`,
			`{"p":-1}`, []string{"/p minimum"}},
		{"recursive $ref", `{"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}},"v":{"type":"string"}}}},"$ref":"#/$defs/node"}`,
			`{"kids":[{"kids":[{"v":3}]}]}`, []string{"/kids/0/kids/0/v type"}},
		{"format is asserted: email", `{"type":"object","properties":{"e":{"type":"string","format":"email"}}}`,
			`{"e":"not-an-email"}`, []string{"/e format"}},
		{"format is asserted: date-time", `{"type":"object","properties":{"d":{"type":"string","format":"date-time"}}}`,
			`{"d":"yesterday"}`, []string{"/d format"}},
		{"format valid", `{"type":"object","properties":{"d":{"type":"string","format":"date-time"},"u":{"type":"string","format":"uri"}}}`,
			`{"d":"2026-11-21T09:00:00Z","u":"https://example.com/x"}`, []string{}},
		{"string bounds", `{"type":"object","properties":{"s":{"type":"string","minLength":1,"maxLength":3}}}`,
			`{"s":""}`, []string{"/s minLength"}},
		{"const", `{"type":"object","properties":{"k":{"const":"A"}}}`, `{"k":"B"}`, []string{"/k const"}},
		{"older draft via $schema", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"integer","maximum":3}}}`,
			`{"n":4}`, []string{"/n maximum"}},
		{"prefixItems and items false", `{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"}],"items":false}}}`,
			`{"t":["a","b"]}`, []string{"/t/1 items"}},
		{"contains names the keyword written", `{"type":"object","properties":{"s":{"type":"array","contains":{"const":"db"}}}}`,
			`{"s":["doc"]}`, []string{"/s contains"}},
		{"minContains when written", `{"type":"object","properties":{"s":{"type":"array","contains":{"const":"db"},"minContains":2}}}`,
			`{"s":["db"]}`, []string{"/s minContains"}},
		{"unknown format is an annotation", `{"type":"object","properties":{"n":{"type":"integer","format":"int32"}}}`,
			`{"n":8443}`, []string{}},
		{"unknown contentMediaType is an annotation", `{"type":"object","properties":{"s":{"type":"string","contentMediaType":"text/html"}}}`,
			`{"s":"123 Main St"}`, []string{}},
		{"known contentMediaType is asserted", `{"type":"object","properties":{"s":{"type":"string","contentMediaType":"application/json"}}}`,
			`{"s":"{not json"}`, []string{"/s contentMediaType"}},
		{"uri-reference: spaces are not URI characters", `{"type":"object","properties":{"r":{"type":"string","format":"uri-reference"},"u":{"type":"string","format":"uri"}}}`,
			`{"r":"invalid uri","u":"https://example.com/a b"}`, []string{"/r format", "/u format"}},
		{"uri-reference: RFC 3986 forms pass", `{"type":"object","properties":{"r":{"type":"string","format":"uri-reference"},"u":{"type":"string","format":"uri"}}}`,
			`{"r":"../a/b%20c?q=1#f","u":"https://user@example.com:8080/p;x=1?q=(a)*b&c=%7E"}`, []string{}},
		{"iri allows non-ASCII, uri does not", `{"type":"object","properties":{"i":{"type":"string","format":"iri"},"u":{"type":"string","format":"uri"}}}`,
			`{"i":"https://例え.jp/パス","u":"https://例え.jp/パス"}`, []string{"/u format"}},
		{"percent must encode a byte", `{"type":"object","properties":{"u":{"type":"string","format":"uri"}}}`,
			`{"u":"https://example.com/%zz"}`, []string{"/u format"}},
		{"big numbers keep precision", `{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993}}}`,
			`{"n":9007199254740994}`, []string{"/n maximum"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rules(mustSchema(t, tt.schema).Validate(mustValue(t, tt.instance)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRequiredNamesMember(t *testing.T) {
	vs := SortViolations(mustSchema(t, guardian).Validate(mustValue(t, `{"verdict":"FAIL","reasons":["x"]}`)))
	var msgs []string
	for _, v := range vs {
		msgs = append(msgs, v.Message)
	}
	want := []string{`required property "required_actions" is missing`, `required property "risk_level" is missing`}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("got %q want %q", msgs, want)
	}
}

// The same invalid output must always give the same list, whatever map
// order the validator used internally.
func TestViolationsStable(t *testing.T) {
	s := mustSchema(t, guardian)
	inst := `{"verdict":"MAYBE","reasons":"no","required_actions":[1,2],"risk_level":"x","e1":1,"e2":2,"e3":3}`
	first := fmt.Sprint(SortViolations(s.Validate(mustValue(t, inst))))
	if first == "[]" {
		t.Fatal("expected violations")
	}
	for i := 0; i < 100; i++ {
		if got := fmt.Sprint(SortViolations(s.Validate(mustValue(t, inst)))); got != first {
			t.Fatalf("run %d differs:\n%s\n%s", i, got, first)
		}
	}
}

func TestCompileRefusesRemoteAndDanglingRefs(t *testing.T) {
	for _, doc := range []string{
		`{"$ref":"https://example.com/schema.json"}`,
		`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/x.json"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"other.json"}}}`,
	} {
		_, err := CompileSchema([]byte(doc))
		if err == nil {
			t.Errorf("%s: compiled, want refusal", doc)
			continue
		}
		if !errors.Is(err, ErrRemoteRef) && !strings.Contains(err.Error(), "ref") {
			t.Errorf("%s: error %v does not name the $ref problem", doc, err)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, doc := range []string{`{`, `[1]`, `"x"`, `{"type":"object","properties":{"a":{"pattern":"(?<"}}}`} {
		if _, err := CompileSchema([]byte(doc)); err == nil {
			t.Errorf("%s: compiled, want error", doc)
		}
	}
}

func TestSchemaJSONKeepsFileOrder(t *testing.T) {
	s := mustSchema(t, "{\n  \"type\": \"object\",\n  \"required\": [\"b\"],\n  \"properties\": {\"b\": {\"description\": \"<a&b>\"}}\n}")
	if got, want := string(s.JSON()), `{"type":"object","required":["b"],"properties":{"b":{"description":"<a&b>"}}}`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

// Violations reach the 422 review, which must never quote the output.
func TestMessagesNeverQuoteTheInstance(t *testing.T) {
	s := mustSchema(t, `{"type":"object","properties":{"a":{"enum":["x","y"]},"n":{"type":"number","maximum":1,"minimum":0,"multipleOf":0.5,"exclusiveMaximum":5},"s":{"type":"string","pattern":"^q","maxLength":2}}}`)
	for _, inst := range []string{`{"a":"SECRET-OUT"}`, `{"n":987654321}`, `{"n":-987654321.25}`, `{"s":"SECRET-OUT"}`} {
		for _, v := range s.Validate(mustValue(t, inst)) {
			if strings.Contains(v.Message, "SECRET") || strings.Contains(v.Message, "98765") {
				t.Errorf("%s: message quotes the instance: %q", inst, v.Message)
			}
		}
	}
}

// A long enum's allowed values are cut at 200 bytes, at a character: a cut
// inside "é" went out as invalid UTF-8 in the 422's violation message.
func TestEnumMessageCutAtACharacter(t *testing.T) {
	long := "a" + strings.Repeat("é", 150) // byte 200 falls inside an é
	s := mustSchema(t, `{"enum":["`+long+`","`+long+`"]}`)
	vs := s.Validate(mustValue(t, `"x"`))
	if len(vs) != 1 {
		t.Fatalf("violations %v", vs)
	}
	m := vs[0].Message
	if !utf8.ValidString(m) || !strings.HasSuffix(m, "é…") || !strings.HasPrefix(m, "value is not one of the allowed values: aéé") {
		t.Errorf("message %q", m)
	}
}

func TestDecodeJSONRejectsDuplicateKeys(t *testing.T) {
	if _, err := DecodeJSON([]byte(`{"subject":"a","subject":"b"}`)); err == nil {
		t.Fatal("duplicate keys accepted")
	}
	v, err := DecodeJSON([]byte(` {"n": 12345678901234567890} `))
	if err != nil || fmt.Sprint(v.(map[string]any)["n"]) != "12345678901234567890" {
		t.Fatalf("got %v %v", v, err)
	}
}

// Check's lists are never nil: callers serialise them as [] (check output,
// audit attempts, review attempts) without patching.
func TestCheckListsNeverNil(t *testing.T) {
	k := &Contract{Name: "k", Schema: mustSchema(t, `{"type":"object"}`), Mode: ModeStrict}
	res := k.Check(`{"a":1}`, nil)
	if !res.Valid || res.Violations == nil || res.Evidence == nil {
		t.Fatalf("valid result: violations %#v evidence %#v", res.Violations, res.Evidence)
	}
}
