package policy

import "testing"

func TestCanMatchSchema(t *testing.T) {
	const classify = `{
		"type": "object", "additionalProperties": false,
		"required": ["intents", "primary_intent"],
		"properties": {
			"primary_intent": {"type": "string"},
			"question": {"type": ["string", "null"]},
			"intents": {"type": "array", "items": {
				"type": "object", "additionalProperties": false,
				"properties": {
					"label": {"type": "string"},
					"evidence_snippets": {"type": "array", "items": {"type": "string"}}
				}
			}}
		}
	}`
	const defs = `{
		"$ref": "#/$defs/root",
		"$defs": {
			"root": {"type": "object", "additionalProperties": false,
				"properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}}},
			"item": {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": false},
			"a b": {"type": "object", "properties": {"sp": true}, "additionalProperties": false}
		}
	}`
	const tree = `{
		"$defs": {"node": {"type": "object", "additionalProperties": false, "properties": {
			"value": {"type": "string"},
			"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
		}}},
		"$ref": "#/$defs/node"
	}`
	const selfLoop = `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`
	const rootLoop = `{"type": "object", "additionalProperties": false,
		"properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}}`
	const anyOf = `{"anyOf": [
		{"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}},
		{"type": "object", "additionalProperties": false, "properties": {"b": {"type": "string"}}}
	]}`
	const allOf = `{"allOf": [
		{"type": "object", "properties": {"a": {"type": "string"}}},
		{"type": "object", "properties": {"b": {"type": "array"}}}
	]}`
	const allOfClosed = `{"allOf": [
		{"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}},
		{"properties": {"b": {"type": "string"}}}
	]}`
	const unevaluated = `{"type": "object", "unevaluatedProperties": false,
		"allOf": [{"properties": {"a": {"type": "string"}}}],
		"properties": {"b": {"type": "object"}}}`
	const ifThen = `{"type": "object", "additionalProperties": false,
		"properties": {"kind": {"type": "string"}, "detail": true},
		"if": {"properties": {"kind": {"const": "x"}}},
		"then": {"properties": {"detail": {"type": "object", "properties": {"x": true}, "additionalProperties": false}}},
		"else": {"properties": {"detail": {"type": "string"}}}}`
	const tuple = `{"type": "array", "prefixItems": [{"type": "string"}, {"type": "object"}], "items": false}`
	const tupleOpen = `{"type": "array", "prefixItems": [{"type": "string"}]}`
	const draft7Tuple = `{"type": "array", "items": [{"type": "string"}], "additionalItems": false}`
	const patterns = `{"type": "object", "additionalProperties": false,
		"patternProperties": {"^x-": {"type": "string"}, "^n[0-9]+$": {"type": "object"}}}`
	const bools = `{"type": "object", "properties": {"yes": true, "no": false}, "additionalProperties": false}`
	const oneOfStrings = `{"oneOf": [{"type": "string"}, {"type": "integer"}]}`

	tests := []struct {
		name   string
		schema string
		path   string
		want   bool
	}{
		{"root always", classify, "", true},
		{"property", classify, "/primary_intent", true},
		{"nested star", classify, "/intents/*/label", true},
		{"nested index", classify, "/intents/3/label", true},
		{"star star", classify, "/intents/*/evidence_snippets/*", true},
		{"missing prop, closed", classify, "/nope", false},
		{"missing nested prop, closed", classify, "/intents/*/nope", false},
		{"into string", classify, "/primary_intent/x", false},
		{"star on string", classify, "/primary_intent/*", false},
		{"star on string items", classify, "/intents/*/evidence_snippets/*/x", false},
		{"name token on array", classify, "/intents/label", false},
		{"star on closed object", classify, "/*", true},
		{"string or null", classify, "/question/x", false},

		{"empty schema", `{}`, "/anything/*/goes", true},
		{"no type, no props", `{"description": "free"}`, "/a/b", true},
		{"type object open", `{"type": "object"}`, "/a/b", true},
		{"props but open", `{"type": "object", "properties": {"a": {"type": "string"}}}`, "/b/c", true},
		{"props but open, into string", `{"type": "object", "properties": {"a": {"type": "string"}}}`, "/a/c", false},
		{"additionalProperties schema", `{"type": "object", "additionalProperties": {"type": "string"}}`, "/a", true},
		{"additionalProperties string deep", `{"type": "object", "additionalProperties": {"type": "string"}}`, "/a/b", false},
		{"no type, closed props, index token", `{"properties": {"a": true}, "additionalProperties": false}`, "/0", true},
		{"no type, closed props, name token", `{"properties": {"a": true}, "additionalProperties": false}`, "/b", false},

		{"ref to $defs", defs, "/items/*/name", true},
		{"ref to $defs missing", defs, "/items/*/other", false},
		{"ref root missing", defs, "/other", false},
		{"ref percent-encoded", `{"$ref": "#/$defs/a%20b", "$defs": {"a b": {"type": "object", "properties": {"sp": true}, "additionalProperties": false}}}`, "/sp", true},
		{"ref percent-encoded missing", `{"$ref": "#/$defs/a%20b", "$defs": {"a b": {"type": "object", "properties": {"sp": true}, "additionalProperties": false}}}`, "/no", false},
		{"ref definitions", `{"$ref": "#/definitions/x", "definitions": {"x": {"type": "string"}}}`, "/a", false},
		{"ref unresolved is permissive", `{"$ref": "#/$defs/missing"}`, "/a", true},
		{"ref remote is permissive", `{"$ref": "https://example.com/s.json"}`, "/a", true},
		{"recursive deep", tree, "/children/*/children/0/children/*/value", true},
		{"recursive deep bad", tree, "/children/*/children/0/value/x", false},
		{"recursive deep unknown", tree, "/children/*/children/*/nope", false},
		{"ref cycle without progress", selfLoop, "/a", true},
		{"ref to root", rootLoop, "/next/next/next/v", true},
		{"ref to root bad", rootLoop, "/next/next/w", false},

		{"anyOf first", anyOf, "/a", true},
		{"anyOf second", anyOf, "/b", true},
		{"anyOf none", anyOf, "/c", false},
		{"oneOf scalars", oneOfStrings, "/a", false},
		{"allOf either", allOf, "/a", true},
		{"allOf other", allOf, "/b/0", true},
		{"allOf conflicting type", allOf, "/a/x", false},
		{"allOf closed branch forbids", allOfClosed, "/b", false},
		{"allOf closed branch allows", allOfClosed, "/a", true},
		{"unevaluated via allOf", unevaluated, "/a", true},
		{"unevaluated via local", unevaluated, "/b/x", true},
		{"unevaluated forbids", unevaluated, "/c", false},
		{"unevaluated star", unevaluated, "/*", true},
		{"unevaluatedItems", `{"type": "array", "prefixItems": [true], "unevaluatedItems": false}`, "/1", false},
		{"unevaluatedItems in range", `{"type": "array", "prefixItems": [true], "unevaluatedItems": false}`, "/0", true},
		{"then branch", ifThen, "/detail/x", true},
		{"then branch closed", ifThen, "/detail/y", false},

		{"prefixItems slot", tuple, "/1/k", true},
		{"prefixItems string slot", tuple, "/0/k", false},
		{"prefixItems beyond, items false", tuple, "/2", false},
		{"prefixItems star", tuple, "/*/k", true},
		{"prefixItems beyond, items absent", tupleOpen, "/5/k", true},
		{"draft7 tuple", draft7Tuple, "/0", true},
		{"draft7 tuple additionalItems false", draft7Tuple, "/1", false},
		{"items false", `{"type": "array", "items": false}`, "/*", false},

		{"patternProperties match", patterns, "/x-foo", true},
		{"patternProperties deep", patterns, "/n12/a", true},
		{"patternProperties string deep", patterns, "/x-foo/a", false},
		{"patternProperties no match", patterns, "/y", false},
		{"patternProperties star", patterns, "/*/a", true},
		{"bad regex is permissive", `{"type": "object", "additionalProperties": false, "patternProperties": {"(?<=a)b": true}}`, "/zzz", true},

		{"true schema", `true`, "/a/*/b", true},
		{"false schema", `false`, "", false},
		{"false schema path", `false`, "/a", false},
		{"true property", bools, "/yes/deep/er", true},
		{"false property", bools, "/no", false},
		{"type list object", `{"type": ["null", "object"]}`, "/a", true},
		{"type list scalars", `{"type": ["null", "string"]}`, "/*", false},
		{"dependentSchemas adds", `{"type": "object", "unevaluatedProperties": false, "dependentSchemas": {"a": {"properties": {"b": true}}}}`, "/b", true},
		{"dependentSchemas never forbids", `{"type": "object", "dependentSchemas": {"a": false}}`, "/b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, tt.path).CanMatchSchema(doc(t, tt.schema)); got != tt.want {
				t.Errorf("CanMatchSchema(%s, %q) = %v, want %v", tt.schema, tt.path, got, tt.want)
			}
		})
	}
}

// A schema whose anyOf branches all refer back to the same definitions must
// not take exponential time.
func TestCanMatchSchemaNoBlowup(t *testing.T) {
	s := `{"$defs": {"d0": {"type": "object", "properties": {"x": {"anyOf": [{"$ref": "#/$defs/d0"}, {"$ref": "#/$defs/d0"}, {"$ref": "#/$defs/d0"}]}}}}, "$ref": "#/$defs/d0"}`
	p := mustParse(t, "/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/y")
	if !p.CanMatchSchema(doc(t, s)) { // y is allowed: additionalProperties absent
		t.Fatal("want true")
	}
}
