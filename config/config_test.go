package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/contractd/contractd/retry"
)

func loadFull(t *testing.T) *Runtime {
	t.Helper()
	t.Setenv("CONTRACTD_TEST_BASE", "http://127.0.0.1:9999")
	rt, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return rt
}

func TestLoadFullConfig(t *testing.T) {
	rt := loadFull(t)
	up := rt.Upstreams["openai"]
	if up.BaseURL != "http://127.0.0.1:9999/v1" {
		t.Errorf("${VAR} not expanded: %q", up.BaseURL)
	}
	if up.MaxTokensParam != "max_completion_tokens" || up.MaxRetries != 2 || up.Timeout.Seconds() != 60 {
		t.Errorf("upstream settings: %+v", up)
	}
	abs, _ := filepath.Abs("testdata/audit.jsonl")
	if rt.Audit.Path != abs {
		t.Errorf("audit path %q not relative to the config file (want %q)", rt.Audit.Path, abs)
	}
	r := rt.Routes["classify-email"]
	if r.Contract.Name != "classify_v1" || r.Prompt.Name != "classify_email" || *r.Seed != 7 || r.MaxOutputTokens != 800 {
		t.Errorf("route: %+v", r)
	}
	if want := retry.DefaultPlan(0.7); !reflect.DeepEqual(r.Plan, want) {
		t.Errorf("default plan %+v, want %+v", r.Plan, want)
	}
	if got := rt.Routes["Guardian-Report"].Plan; len(got) != 3 || got[1].Shorten == nil || got[1].Shorten.Keep != retry.KeepHeadTail || got[2].Temperature != 0 {
		t.Errorf("explicit plan: %+v", got)
	}
	if !rt.Routes["raw-chat"].Passthrough {
		t.Error("raw-chat should pass through")
	}
	if len(rt.RouteList) != 4 || rt.RouteList[0].Name != "classify-email" {
		t.Errorf("route order: %v", rt.RouteList)
	}
}

// viper lowercases map keys; names and schema properties must keep case.
func TestNamesAreCaseSensitive(t *testing.T) {
	rt := loadFull(t)
	if rt.Labels["Guardian-Report"][0] != "PASS" || rt.Labels["guardian-report"][0] != "FAIL" {
		t.Errorf("label sets collapsed: %v", rt.Labels)
	}
	up, lo := rt.Contracts["Guardian-Report"], rt.Contracts["guardian-report"]
	if up == nil || lo == nil || up == lo {
		t.Fatal("contracts collapsed")
	}
	if !strings.Contains(string(up.Schema.JSON()), `"Verdict"`) || !strings.Contains(string(lo.Schema.JSON()), `"verdict"`) {
		t.Errorf("schema keys lost case: %s / %s", up.Schema.JSON(), lo.Schema.JSON())
	}
	if rt.Routes["Guardian-Report"].Temperature != 0.2 || rt.Routes["guardian-report"].Temperature != 1 {
		t.Error("routes collapsed")
	}
	if rt.Prompts["classify_email"].ExampleInput.(map[string]any)["Subject"] != "Broken window" {
		t.Error("example_input keys lost case")
	}
}

// ${VAR} is content outside server/audit/upstreams: never expanded.
func TestEnvExpansionScope(t *testing.T) {
	rt := loadFull(t)
	s, err := rt.Routes["Guardian-Report"].Prompt.RenderSystem(contractsData())
	if err != nil || s != "Upper ${NOT_EXPANDED}" {
		t.Errorf("prompt content changed: %q %v", s, err)
	}
}

func TestSchemaPrintedCompactInFileOrder(t *testing.T) {
	rt := loadFull(t)
	r := rt.Routes["classify-email"]
	s, err := r.Prompt.RenderSystem(exampleData(r))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, `{"type":"object","additionalProperties":false,"required":["intents","primary_intent"],`) {
		t.Errorf("schema not compact in file order:\n%s", s)
	}
	if !strings.HasSuffix(s, "}\n") {
		t.Errorf("the | block's final newline was lost: %q", s[len(s)-5:])
	}
}

// problemsOf loads YAML text and returns "path: message" lines.
// wantProblem fails unless one of got contains want.
func wantProblem(t *testing.T, got []string, want string) {
	t.Helper()
	for _, g := range got {
		if strings.Contains(g, want) {
			return
		}
	}
	t.Errorf("no problem containing %q; got:\n  %s", want, strings.Join(got, "\n  "))
}

// wantNoSecret fails for every problem that repeats secret: a problem
// names what is wrong with a URL without echoing its password.
func wantNoSecret(t *testing.T, got []string, secret string) {
	t.Helper()
	for _, g := range got {
		if strings.Contains(g, secret) {
			t.Errorf("a problem echoes a URL's secret: %s", g)
		}
	}
}

func problemsOf(t *testing.T, yaml string, env map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "schemas", "ok.json"), []byte(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "schemas", "remote.json"), []byte(`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`), 0o644)
	for k, v := range env {
		t.Setenv(k, v)
	}
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil {
		return nil
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a config error: %v", err)
	}
	var out []string
	for _, p := range ce.Problems {
		if p.File != path {
			t.Errorf("problem does not name the file: %+v", p)
		}
		out = append(out, p.Path+": "+p.Message)
	}
	return out
}

const base = `
upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
labels: [{name: intent, values: [a, b]}]
prompts:
  - name: p
    system: "S {{ schema }}"
contracts:
  - name: k
    schema_file: schemas/ok.json
`

func TestValidateProblems(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // substring of one problem line
	}{
		{"unknown top-level key", base + "bogus: 1\n", `bogus: unknown key "bogus"`},
		{"unknown nested key names its path", base + "routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 1, retry: [{temperature: 0, shorten: {ratio: 0.5, kep: head}}]}]\n",
			`routes[0].retry[0].shorten.kep: unknown key "kep"`},
		{"unset env var", "server: {listen: \"${NOPE_NOT_SET}\"}\n" + base, `server.listen: environment variable NOPE_NOT_SET is not set`},
		{"dangling upstream", base + "routes: [{name: r, upstream: nope, model: m, prompt: p, contract: k, temperature: 1}]\n", `routes[0].upstream: unknown upstream "nope"`},
		{"dangling prompt", base + "routes: [{name: r, upstream: up, model: m, prompt: nope, contract: k, temperature: 1}]\n", `routes[0].prompt: unknown prompt "nope"`},
		{"dangling contract", base + "routes: [{name: r, upstream: up, model: m, prompt: p, contract: nope, temperature: 1}]\n", `routes[0].contract: unknown contract "nope"`},
		{"dangling label set", base + "  - name: k2\n    schema_file: schemas/ok.json\n    policies: {labels: [{path: /a, set: nope}]}\n", `unknown label set "nope" (defined: intent)`},
		{"dangling label set, none defined", "contracts: [{name: k, schema: {type: object, properties: {a: {type: string}}}, policies: {labels: [{path: /a, set: x}]}}]\n", `unknown label set "x" (none is defined)`},
		// A dangling name says what it may have meant: the closest defined
		// name (a typo, another case: names are case-sensitive), else
		// every defined name.
		{"dangling upstream names the defined ones", base + "routes: [{name: r, upstream: nope, model: m, prompt: p, contract: k, temperature: 1}]\n", `routes[0].upstream: unknown upstream "nope" (defined: up)`},
		{"dangling contract in another case", base + "routes: [{name: r, upstream: up, model: m, prompt: p, contract: K, temperature: 1}]\n", `routes[0].contract: unknown contract "K" (did you mean "k"?)`},
		{"dangling prompt one letter off", strings.Replace(base, "  - name: p\n", "  - name: classify_email\n", 1) + "routes: [{name: r, upstream: up, model: m, prompt: clasify_email, contract: k, temperature: 1}]\n",
			`routes[0].prompt: unknown prompt "clasify_email" (did you mean "classify_email"?)`},
		{"dangling label set in another case", strings.Replace(base, "{name: intent, values: [a, b]}", "{name: intent, values: [a, b]}, {name: question_class, values: [c]}", 1) + "  - name: k2\n    schema_file: schemas/ok.json\n    policies: {labels: [{path: /a, set: Question_Class}]}\n",
			`unknown label set "Question_Class" (did you mean "question_class"?)`},
		{"temperature required", base + "routes: [{name: r, upstream: up, model: m, prompt: p, contract: k}]\n", `routes[0].temperature: temperature is required`},
		{"schema does not compile", base + "  - name: k2\n    schema: {type: object, properties: {a: {pattern: \"(?<\"}}}\n", `contracts[1].schema:`},
		{"remote $ref refused", base + "  - name: k2\n    schema_file: schemas/remote.json\n", `remote or unresolved $ref`},
		{"missing schema file", base + "  - name: k2\n    schema_file: schemas/missing.json\n", `contracts[1].schema_file: cannot read schemas/missing.json`},
		{"template does not parse", strings.Replace(base, "contracts:", "  - name: p2\n    system: \"{{ .Input \"\ncontracts:", 1), `prompts[1]: template does not parse`},
		{"template does not render with example_input", `
upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts:
  - name: p
    input_schema: {type: object, properties: {a: {type: string}}}
    example_input: {a: x}
    system: "S"
    user: "{{ .Input.missing }}"
contracts: [{name: k, schema_file: schemas/ok.json}]
routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 1}]
`, `does not render with example_input`},
		{"example_input must match input_schema", `
upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts:
  - name: p
    input_schema: {type: object, required: [a], properties: {a: {type: string}}}
    example_input: {a: 3}
    system: "S"
contracts: [{name: k, schema_file: schemas/ok.json}]
`, `example_input: does not match input_schema`},
		{"bad regex", base + "  - name: k2\n    schema_file: schemas/ok.json\n    policies: {forbidden: [{name: f, path: /a, pattern: \"(\"}]}\n", `pattern: bad regex`},
		{"policy path cannot match schema", base + "  - name: k2\n    schema_file: schemas/ok.json\n    policies: {questions: [{path: /nope, max: 0}]}\n", `path "/nope" cannot match anything the schema allows`},
		{"duplicate names", base + "  - name: k\n    schema_file: schemas/ok.json\n", `duplicate contract name "k"`},
		{"bad name", base + "  - name: \"has space\"\n    schema_file: schemas/ok.json\n", `invalid contract name "has space"`},
		{"bad enum value", base + "routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 1, response_format: xml}]\n", `routes[0].response_format: unknown response_format "xml" (none, json_object, json_schema)`},
		{"bad client_system", base + "routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 1, client_system: keep}]\n", `routes[0].client_system: unknown client_system "keep" (reject, drop)`},
		{"bad extraction", base + "  - name: k2\n    schema_file: schemas/ok.json\n    extraction: fuzzy\n", `contracts[1].extraction: unknown extraction "fuzzy" (strict, lenient, repair)`},
		{"bad type", base + "routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: hot}]\n", `routes[0].temperature: must be a number`},
		{"bad duration", "server: {request_timeout: soon}\n" + base, `server.request_timeout: invalid duration "soon"`},
		{"passthrough takes no contract", base + "routes: [{name: r, upstream: up, model: m, passthrough: true, contract: k}]\n", `passthrough routes forward requests untouched`},
		{"questions needs exactly one bound", base + "  - name: k2\n    schema_file: schemas/ok.json\n    policies: {questions: [{path: /a}]}\n", `give exactly one of exactly or max`},
		{"bad yaml", "server: [\n", `invalid YAML`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yaml, nil)
			wantProblem(t, got, tt.want)
		})
	}
}

func TestProblemsCarryLineNumbers(t *testing.T) {
	_, err := LoadBytes("c.yaml", []byte("upstreams:\n  - name: up\n    base_url: \"http://x/v1\"\n    tiemout: 3s\n"))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	if p := ce.Problems[0]; p.Line != 4 || p.String() != `c.yaml:4: upstreams[0].tiemout: unknown key "tiemout" (did you mean "timeout"?)` {
		t.Errorf("got %q (line %d)", p.String(), p.Line)
	}
}

func TestWarnings(t *testing.T) {
	rt, err := LoadBytes(filepath.Join(t.TempDir(), "c.yaml"), []byte(`
upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts: [{name: unused, system: "x"}, {name: p, system: "x"}]
contracts: [{name: k, schema: {type: object, properties: {a: {type: object}, n: {type: integer, format: int32}}}}]
routes: [{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 1}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var ws []string
	for _, w := range rt.Warnings {
		ws = append(ws, w.Path+": "+w.Message)
	}
	all := strings.Join(ws, "\n")
	for _, want := range []string{`object schema at "#" allows extra keys`, `object schema at "#/properties/a" allows extra keys`,
		`prompt "unused" is not used by any route`, `unknown format(s) int32`} {
		if !strings.Contains(all, want) {
			t.Errorf("missing warning %q in:\n%s", want, all)
		}
	}
}

// routeWarnings are the warnings of a config of one upstream (up), prompt
// (p) and contract (k), and the route given as a YAML flow mapping.
func routeWarnings(t *testing.T, route string) []Problem {
	t.Helper()
	rt, err := LoadBytes(filepath.Join(t.TempDir(), "c.yaml"), []byte(`upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts: [{name: p, system: "x"}]
contracts: [{name: k, schema: {type: object, additionalProperties: false}}]
routes:
  - `+route+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return rt.Warnings
}

// TestRetryOverridesTemperature: a route that sets retry runs attempt 1 at
// retry[0]'s temperature, so a route temperature that differs is never
// sent; validate says so at the route's temperature line instead of
// letting `temperature: 0.7` beside `retry: [{temperature: 0}]` look like
// a hot first attempt. Equal values, or no retry, warn nothing.
func TestRetryOverridesTemperature(t *testing.T) {
	ws := routeWarnings(t, `{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 0.7, retry: [{temperature: 0}, {temperature: 0}]}`)
	if len(ws) != 1 || ws[0].Path != "routes[0].temperature" || ws[0].Line != 5 ||
		ws[0].Message != "0.7 is not used: with retry, attempt 1 runs at retry[0].temperature (0); set the two equal" {
		t.Errorf("warnings %v, want one at routes[0].temperature (line 5) naming retry[0].temperature", ws)
	}
	for _, route := range []string{
		`{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 0.7, retry: [{temperature: 0.7}, {temperature: 0}]}`,
		`{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 0.7}`,
	} {
		if ws := routeWarnings(t, route); len(ws) != 0 {
			t.Errorf("%s: warnings %v, want none", route, ws)
		}
	}
}

// TestBudgetBelowMaxOutput: attempt 1 runs only when its input plus
// max_output_tokens fit in budget.max_total_tokens, so a budget at or
// below max_output_tokens (1024 unless set) makes every request a 422
// budget_exhausted with no attempt; validate warns at the budget's line.
// A budget with room, or none, warns nothing.
func TestBudgetBelowMaxOutput(t *testing.T) {
	const r = `{name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 0.7`
	for route, want := range map[string]string{
		r + `, budget: {max_total_tokens: 300}}`: "300 leaves no room for attempt 1: an attempt runs only when its input plus max_output_tokens (1024) fit in it, " +
			"so every request ends in 422 budget_exhausted without calling the upstream; raise it or lower max_output_tokens",
		r + `, max_output_tokens: 200, budget: {max_total_tokens: 200}}`: "200 leaves no room for attempt 1",
	} {
		ws := routeWarnings(t, route)
		if len(ws) != 1 || ws[0].Path != "routes[0].budget.max_total_tokens" || ws[0].Line != 5 || !strings.HasPrefix(ws[0].Message, want) {
			t.Errorf("%s: warnings %v, want one at routes[0].budget.max_total_tokens (line 5): %s", route, ws, want)
		}
	}
	for _, route := range []string{r + `, max_output_tokens: 200, budget: {max_total_tokens: 2000}}`, r + `, budget: {max_input_tokens: 10}}`, r + `}`} {
		if ws := routeWarnings(t, route); len(ws) != 0 {
			t.Errorf("%s: warnings %v, want none", route, ws)
		}
	}
}

// TestJSONSchemaOptionalProperties: response_format json_schema sends the
// contract with strict: true, which OpenAI's structured outputs refuse when
// an object leaves a property optional (a 400 on every request, a 502 to
// the client); validate warns at the route's response_format line, naming
// the optional properties' pointers, nested ones included. A contract
// whose properties are all required, or json_object, warns nothing.
func TestJSONSchemaOptionalProperties(t *testing.T) {
	load := func(schema, format string) []Problem {
		t.Helper()
		rt, err := LoadBytes(filepath.Join(t.TempDir(), "c.yaml"), []byte(`upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts: [{name: p, system: "x"}]
contracts: [{name: k, schema: `+schema+`}]
routes:
  - {name: r, upstream: up, model: m, prompt: p, contract: k, temperature: 0.7, response_format: `+format+`}
`))
		if err != nil {
			t.Fatal(err)
		}
		return rt.Warnings
	}
	const optional = `{type: object, additionalProperties: false, required: [answer_text, meta], properties: {answer_text: {type: string, enum: [a]},
    assumptions: {type: array, items: {type: string}}, meta: {type: object, additionalProperties: false, required: [], properties: {"a/b": {type: string}}}}}`
	ws := load(optional, "json_schema")
	want := `json_schema sends contract "k" with strict: true, and OpenAI's structured outputs refuse a strict schema that leaves properties optional ` +
		`(#/properties/assumptions, #/properties/meta/properties/a~1b): every request would fail`
	if len(ws) != 1 || ws[0].Path != "routes[0].response_format" || ws[0].Line != 6 || !strings.HasPrefix(ws[0].Message, want) {
		t.Errorf("warnings %v, want one at routes[0].response_format (line 6): %s", ws, want)
	}
	if ws := load(optional, "json_object"); len(ws) != 0 {
		t.Errorf("json_object: warnings %v, want none", ws)
	}
	if ws := load(`{type: object, additionalProperties: false, required: [a], properties: {a: {type: [string, "null"]}}}`, "json_schema"); len(ws) != 0 {
		t.Errorf("every property required: warnings %v, want none", ws)
	}
}

// TestResponseFormatJSON: a route's response_format value is built when
// the config is compiled, the same bytes every attempt sends: none sends
// nothing, json_object its fixed object, json_schema the contract's compact
// schema, strict, under its name with every byte outside [A-Za-z0-9_-]
// made "_" (a contract name may hold ".") and cut to 64.
func TestResponseFormatJSON(t *testing.T) {
	long := strings.Repeat("n", 70)
	for _, tc := range []struct{ format, contract, want string }{
		{"none", "k", ""},
		{"json_object", "k", `{"type":"json_object"}`},
		{"json_schema", "k", `{"type":"json_schema","json_schema":{"name":"k","strict":true,"schema":{"type":"object","required":["a"],"properties":{"a":{"type":"string"}},"additionalProperties":false}}}`},
		{"json_schema", "answer.v1", `{"type":"json_schema","json_schema":{"name":"answer_v1","strict":true,"schema":`},
		{"json_schema", long, `{"type":"json_schema","json_schema":{"name":"` + long[:64] + `","strict":true,`},
	} {
		rt, err := LoadBytes(filepath.Join(t.TempDir(), "c.yaml"), []byte(`upstreams: [{name: up, base_url: "http://127.0.0.1:1/v1"}]
prompts: [{name: p, system: "x"}]
contracts: [{name: `+tc.contract+`, schema: {type: object, required: [a], properties: {a: {type: string}}, additionalProperties: false}}]
routes:
  - {name: r, upstream: up, model: m, prompt: p, contract: `+tc.contract+`, temperature: 0.7, response_format: `+tc.format+`}
`))
		if err != nil {
			t.Fatal(err)
		}
		got := string(rt.Routes["r"].ResponseFormatJSON)
		if !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") || (tc.format != "json_schema" && got != tc.want) {
			t.Errorf("%s, contract %s: response_format %s, want %s", tc.format, tc.contract, got, tc.want)
		}
		if got != "" && !json.Valid([]byte(got)) {
			t.Errorf("%s, contract %s: response_format %s is not JSON", tc.format, tc.contract, got)
		}
	}
}

// A config may hold contracts and labels alone, for offline check.
func TestContractsOnlyConfig(t *testing.T) {
	rt, err := LoadBytes("c.yaml", []byte("labels: [{name: l, values: [x]}]\ncontracts: [{name: k, schema: {type: object, additionalProperties: false}}]\n"))
	if err != nil || rt.Contracts["k"] == nil || len(rt.Routes) != 0 {
		t.Fatalf("contracts-only config: %v", err)
	}
}

func TestResolve(t *testing.T) {
	t.Setenv(EnvConfig, "")
	os.Unsetenv(EnvConfig)
	if got := Resolve(""); got != DefaultFile {
		t.Errorf("default: %q", got)
	}
	t.Setenv(EnvConfig, "/etc/x.yaml")
	if got := Resolve(""); got != "/etc/x.yaml" {
		t.Errorf("env: %q", got)
	}
	if got := Resolve("flag.yaml"); got != "flag.yaml" {
		t.Errorf("flag: %q", got)
	}
}

// TestProblemsInStableOrder: the same config lists its problems in the
// same order every time (file order), though some checks iterate maps.
func TestProblemsInStableOrder(t *testing.T) {
	cfg := base + `
routes:
  - name: pt
    upstream: up
    model: m
    passthrough: true
    prompt: p
    contract: k
    temperature: 0.5
    seed: 1
    max_output_tokens: 10
    client_system: drop
  - name: bad
    upstream: nope
    model: m
    prompt: nope
    contract: nope
`
	first := problemsOf(t, cfg, nil)
	if len(first) < 8 {
		t.Fatalf("want many problems, got %v", first)
	}
	for range 30 {
		if got := problemsOf(t, cfg, nil); !slices.Equal(got, first) {
			t.Fatalf("order changed:\n%v\nthen\n%v", first, got)
		}
	}
}
