package policy

import "testing"

// A policy path must be able to reach a string: labels, evidence,
// questions and forbidden patterns judge strings, so a path whose every
// reachable subschema declares another type is refused (an array's own
// path where its items were meant is the usual slip). Only "type" rules a
// string out; everything else errs towards true, as CanMatchSchema does.
func TestCanMatchStringInSchema(t *testing.T) {
	const s = `{
		"type": "object", "additionalProperties": false,
		"properties": {
			"label": {"type": "string"},
			"maybe": {"type": ["string", "null"]},
			"n": {"type": "integer"},
			"tags": {"type": "array", "items": {"type": "string"}},
			"obj": {"type": "object", "properties": {"x": {"type": "string"}}},
			"any": {},
			"enum": {"enum": [1, 2]},
			"ref": {"$ref": "#/$defs/num"},
			"refstr": {"$ref": "#/$defs/str"},
			"either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
			"neither": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
			"both": {"allOf": [{"type": ["string", "integer"]}, {"type": "integer"}]},
			"mixed": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
			"nums": {"type": "object", "additionalProperties": {"type": "number"}},
			"t": true
		},
		"$defs": {"num": {"type": "number"}, "str": {"type": "string"}}
	}`
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/label", true},
		{"/maybe", true},
		{"/n", false},
		{"/tags", false},
		{"/tags/*", true},
		{"/tags/0", true},
		{"/obj", false},
		{"/obj/x", true},
		{"/any", true},
		{"/enum", true}, // only type rules a string out
		{"/ref", false},
		{"/refstr", true},
		{"/either", true},
		{"/neither", false},
		{"/both", false},
		{"/mixed/*", true},
		{"/mixed/b", false},
		{"/nums/*", false},
		{"/t", true},
		{"/*", true},
	} {
		p := mustParse(t, tc.path)
		if got := p.CanMatchStringInSchema(doc(t, s)); got != tc.want {
			t.Errorf("%s: CanMatchStringInSchema = %v, want %v", tc.path, got, tc.want)
		}
		// Reaching a value at all is the weaker question.
		if !p.CanMatchSchema(doc(t, s)) {
			t.Errorf("%s: CanMatchSchema = false", tc.path)
		}
	}
	// A path that cannot match at all cannot match a string either.
	if mustParse(t, "/nope").CanMatchStringInSchema(doc(t, s)) {
		t.Error("/nope: want false")
	}
	// The true schema and a schema without type: anything.
	for _, sch := range []string{`true`, `{}`} {
		if !mustParse(t, "/a/b").CanMatchStringInSchema(doc(t, sch)) {
			t.Errorf("%s: want true", sch)
		}
	}
}
