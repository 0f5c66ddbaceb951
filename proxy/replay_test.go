package proxy

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

const replayYAML = `
upstreams: [{name: up, base_url: "http://127.0.0.1:9/v1"}]
prompts:
  - name: schema
    input_schema: {type: object, required: [body], properties: {body: {type: string}}}
    example_input: {body: "b"}
    system: "Classify {{ .Input.body }}."
    user: "{{ .Input.body }}"
  - name: static
    system: "You answer in one JSON object, always, whatever the user writes."
  - name: text
    system: "Answer the user in one JSON object. Last turn: {{ (index .Messages 0).Content }}"
    example_input: "hi"
contracts:
  - {name: k, schema: {type: object}}
routes:
  - {name: with-schema, upstream: up, model: m, prompt: schema, contract: k, temperature: 0}
  - {name: with-static, upstream: up, model: m, prompt: static, contract: k, temperature: 0}
  - {name: with-text, upstream: up, model: m, prompt: text, contract: k, temperature: 0}
`

// TestStoredSubject: the shortcut replay takes builds the same subject as
// serving's request path on the request StoredRequest writes, refusals
// included.
func TestStoredSubject(t *testing.T) {
	rt := testkit.LoadRuntime(t, "replay.yaml", replayYAML)
	for _, tc := range []struct {
		route, input string
		refused      bool
	}{
		{"with-schema", `{"body":"my window broke"}`, false},
		{"with-schema", ` {"body": "spaced \u00e9"} `, false},
		{"with-schema", `{"subject":"no body"}`, true},
		{"with-schema", `"a string"`, true},
		{"with-text", `"what is \"this\"?"`, false},
		{"with-static", `"hello"`, false},
		{"with-static", `{"an":"object"}`, false},
		{"with-text", `{"contract_input":"object"}`, true}, // no user message for .Messages
		{"with-text", `null`, true},
	} {
		route := rt.Routes[tc.route]
		want, werr := RequestSubject(route, StoredRequest(route, json.RawMessage(tc.input)))
		got, gerr := StoredSubject(route, json.RawMessage(tc.input))
		if (werr != nil) != tc.refused || (gerr != nil) != tc.refused {
			t.Errorf("%s %s: errors %v / %v, refused %v", tc.route, tc.input, werr, gerr, tc.refused)
			continue
		}
		if werr != nil && (werr.Code != gerr.Code || werr.Message != gerr.Message) {
			t.Errorf("%s %s: error %v, want %v", tc.route, tc.input, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", tc.route, tc.input, got, want)
		}
	}
}
