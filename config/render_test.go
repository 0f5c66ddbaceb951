package config

import (
	"strings"
	"testing"
)

// {{ schema }} prints the schema of the route's contract: one prompt used by
// two routes with different contracts renders each route's own, in the
// system and the user template alike, compact and in file order.
func TestSchemaIsTheRoutes(t *testing.T) {
	rt, err := LoadBytes("c.yaml", []byte(`
upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts: [{name: p, system: "S {{ schema }}", user: "U {{ schema }}"}]
contracts:
  - {name: k1, schema: {type: object, properties: {one: {type: string}}, additionalProperties: false}}
  - {name: k2, schema: {type: object, properties: {two: {type: string, pattern: "<&>"}}, additionalProperties: false}}
routes:
  - {name: r1, upstream: up, model: m, prompt: p, contract: k1, temperature: 1}
  - {name: r2, upstream: up, model: m, prompt: p, contract: k2, temperature: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"r1": `{"type":"object","properties":{"one":{"type":"string"}},"additionalProperties":false}`,
		"r2": `{"type":"object","properties":{"two":{"type":"string","pattern":"<&>"}},"additionalProperties":false}`,
	} {
		r := rt.Routes[name]
		sys, err := r.Prompt.RenderSystem(exampleData(r))
		if err != nil || sys != "S "+want {
			t.Errorf("%s: system %q (%v), want %q", name, sys, err, "S "+want)
		}
		user, ok, err := r.Prompt.RenderUser(exampleData(r))
		if err != nil || !ok || user != "U "+want {
			t.Errorf("%s: user %q (%v), want %q", name, user, err, "U "+want)
		}
		if strings.Contains(sys, `\u003c`) {
			t.Errorf("%s: HTML-escaped schema %q", name, sys)
		}
	}
}
