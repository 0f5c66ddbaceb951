package config

import "testing"

// validate refuses a policy path that can only hold something other than a
// string: the labels there would fail every output that has the member,
// and evidence, questions and forbidden patterns would judge nothing.
func TestPolicyPathsMustReachAString(t *testing.T) {
	const k2 = "  - name: k2\n    schema: {type: object, properties: {tags: {type: array, items: {type: string}}, n: {type: integer}, s: {type: string}}}\n    policies: "
	for _, tc := range []struct{ policies, want string }{
		{"{labels: [{path: /tags, set: intent}]}", `contracts[1].policies.labels[0].path: path "/tags" cannot match a string the schema allows (policies judge strings; for an array's items use /tags/*)`},
		{"{evidence: [{path: /n}]}", `contracts[1].policies.evidence[0].path: path "/n" cannot match a string the schema allows`},
		{"{questions: [{path: /tags, max: 0}]}", `contracts[1].policies.questions[0].path: path "/tags" cannot match a string`},
		{"{forbidden: [{name: f, path: /n, pattern: x}]}", `contracts[1].policies.forbidden[0].path: path "/n" cannot match a string`},
	} {
		wantProblem(t, problemsOf(t, base+k2+tc.policies+"\n", nil), tc.want)
	}
	ok := base + k2 + "{labels: [{path: /tags/*, set: intent}], evidence: [{path: /s}], questions: [{path: /s, exactly: 1}], forbidden: [{name: f, path: /*, pattern: x}]}\n"
	if got := problemsOf(t, ok, nil); len(got) != 0 {
		t.Errorf("string paths refused: %q", got)
	}
}

// An evidence source is a pointer into the input object: on a route whose
// prompt has an input_schema, a source that schema cannot hold a string at
// (a typo, a number member) would fail the evidence of every request, so
// validate refuses the route. Without input_schema there is nothing to
// check against.
func TestEvidenceSourceMustReachAStringInTheInput(t *testing.T) {
	cfg := func(source, schema string) string {
		return `
upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts:
  - name: p
` + schema + `    system: "S"
contracts:
  - name: k
    schema: {type: object, properties: {q: {type: string}}, additionalProperties: false}
    policies: {evidence: [{path: /q, source: ` + source + `}]}
routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 1}]
`
	}
	const inSchema = "    input_schema: {type: object, properties: {body: {type: string}, n: {type: integer}}, additionalProperties: false}\n    example_input: {body: x}\n"
	for _, tc := range []struct{ source, schema, want string }{
		{"/body", inSchema, ""},
		{"/bdy", inSchema, `routes[0].contract: evidence source "/bdy" (contracts[0].policies.evidence[0]) cannot match a string that prompt "p"'s input_schema allows`},
		{"/n", inSchema, `evidence source "/n"`},
		{"/bdy", "", ""}, // no input_schema: nothing to check against
	} {
		got := problemsOf(t, cfg(tc.source, tc.schema), nil)
		if tc.want == "" {
			if len(got) != 0 {
				t.Errorf("source %s: problems %q", tc.source, got)
			}
			continue
		}
		wantProblem(t, got, tc.want)
	}
}

// lenient extraction unwraps {"text": "..."} only when the contract does not
// itself declare a top-level text member; a root that is a $ref to a
// definition (as zod-to-json-schema and others write schemas) declares what
// the definition declares, so {"text": "hello"} is the output there, not a
// wrapper around the non-JSON "hello".
func TestLenientTextWrapperSeesThroughRootRef(t *testing.T) {
	for name, tc := range map[string]struct {
		schema string
		valid  bool
	}{
		"properties":      {`{type: object, required: [text], properties: {text: {type: string}}, additionalProperties: false}`, true},
		"root $ref":       {`{$ref: "#/definitions/Answer", definitions: {Answer: {type: object, required: [text], properties: {text: {type: string}}, additionalProperties: false}}}`, true},
		"allOf":           {`{allOf: [{$ref: "#/$defs/A"}], $defs: {A: {type: object, required: [text], properties: {text: {type: string}}}}}`, true},
		"not declared":    {`{type: object, properties: {answer: {type: string}}}`, false},
		"ref not to text": {`{$ref: "#/$defs/A", $defs: {A: {type: object, properties: {answer: {type: string}}}}}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			rt, err := LoadBytes("c.yaml", []byte("contracts: [{name: k, extraction: lenient, schema: "+tc.schema+"}]\n"))
			if err != nil {
				t.Fatal(err)
			}
			res := rt.Contracts["k"].Check(`{"text": "hello"}`, nil)
			if res.Valid != tc.valid {
				t.Errorf(`{"text": "hello"}: valid %v, want %v (%v)`, res.Valid, tc.valid, res.Violations)
			}
		})
	}
}
