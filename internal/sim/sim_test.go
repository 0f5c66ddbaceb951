package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/testkit"
)

// Every schema file under examples/ gets valid instances from the schema
// alone (no config: response_format json_schema, and the schema printed in
// a system prompt).
func TestValidAgainstEverySchemaFile(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*/schemas/*.json")
	if len(files) == 0 {
		t.Fatal("no schema files under examples/")
	}
	s := New(Options{FailureRate: 1}) // sim_mode valid must win over the rate
	for _, f := range files {
		raw := readFile(t, f)
		schema, err := contracts.CompileSchema(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			for i := 0; i < 24; i++ {
				var body []byte
				if i%2 == 0 {
					body = fmt.Appendf(nil, `{"model":"gpt-4o-mini","temperature":0.7,"sim_mode":"valid","user":"u%d",`+
						`"messages":[{"role":"user","content":"Please answer about the storm damage to my kitchen window."}],`+
						`"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":%s}}}`, i, raw)
				} else {
					sys := "Answer in JSON. Note: {braces in prose} and \"quotes\" are not the schema.\nSchema:\n" + compact.String() + "\nNothing else."
					m := map[string]any{"model": "gpt-4o-mini", "temperature": 0.7, "sim_mode": "valid", "user": fmt.Sprint(i),
						"messages": []any{map[string]any{"role": "system", "content": sys}, map[string]any{"role": "user", "content": "My window broke."}}}
					body, _ = json.Marshal(m)
				}
				rep := complete(t, s, body)
				if rep.Contract != "schema" {
					t.Fatalf("schema not found in the request (contract %q)", rep.Contract)
				}
				var v any
				if err := json.Unmarshal([]byte(*rep.Content), &v); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, *rep.Content)
				}
				if vs := schema.Validate(v); len(vs) > 0 {
					t.Fatalf("invalid instance %s:\n%v", *rep.Content, vs)
				}
			}
		})
	}
}

func complete(t *testing.T, s *Sim, body []byte) *Reply {
	t.Helper()
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Complete(body, &req, "")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// With the config loaded, valid outputs also satisfy every policy
// (canonical labels, evidence quoted from the input, question counts,
// forbidden patterns, prompt leaks), judged as contractd judges them with
// the real input object.
func TestValidAgainstEveryConfigContract(t *testing.T) {
	for _, path := range append(exampleConfigs(t), demoConfig) {
		cat := loadCatalog(t, path)
		s := New(Options{Catalog: cat, FailureRate: 0})
		_, cs := calls(t, path)
		for ci, c := range cs {
			for i := 0; i < 10; i++ {
				temp := 0.7
				if i%3 == 0 {
					temp = 0
				}
				body, req := c.body(t, temp, "", fmt.Sprint(i))
				rep, err := s.Complete(body, req, "")
				if err != nil {
					t.Fatal(err)
				}
				if rep.Contract != c.route.Contract.Name {
					t.Fatalf("%s: matched contract %q, want %q", c.route.Name, rep.Contract, c.route.Contract.Name)
				}
				if rules := judge(c.route.Contract, rep, c.subjectFor()); len(rules) > 0 {
					t.Errorf("%s (%s, input %d, try %d): valid output rejected: %v\n%s", path, c.route.Name, ci, i, rules, *rep.Content)
				}
			}
		}
	}
}

// The same body and seed always give the same reply; another seed gives
// other replies.
func TestDeterministic(t *testing.T) {
	cat := loadCatalog(t, demoConfig)
	_, cs := calls(t, demoConfig)
	a := New(Options{Seed: 42, Catalog: cat, FailureRate: 0.5, ColdFactor: 0.2})
	b := New(Options{Seed: 42, Catalog: cat, FailureRate: 0.5, ColdFactor: 0.2})
	other := New(Options{Seed: 43, Catalog: cat, FailureRate: 0.5, ColdFactor: 0.2})
	differ := 0
	for _, c := range cs {
		for _, temp := range []float64{0.7, 0} {
			body, req := c.body(t, temp, "", "")
			r1, _ := a.Complete(body, req, "")
			r2, _ := b.Complete(body, req, "")
			r3, _ := a.Complete(body, req, "")
			if !sameReply(r1, r2) || !sameReply(r1, r3) {
				t.Fatalf("%s at %v: replies differ for the same seed and body", c.route.Name, temp)
			}
			if r4, _ := other.Complete(body, req, ""); !sameReply(r1, r4) {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Fatal("another seed changed nothing")
	}
}

func sameReply(a, b *Reply) bool {
	ca, cb := "", ""
	if a.Content != nil {
		ca = *a.Content
	}
	if b.Content != nil {
		cb = *b.Content
	}
	return ca == cb && a.Refusal == b.Refusal && a.Finish == b.Finish && a.Mode == b.Mode && a.Usage == b.Usage && a.ID == b.ID
}

// expectedRule is the violation a failure mode must produce.
func expectedRule(m Mode, k *contracts.Contract, hints *Hints) string {
	lenient := k.Mode != contracts.ModeStrict
	switch m {
	case ModeFence:
		if lenient {
			return "" // lenient extraction takes the fenced block: valid
		}
		return contracts.RuleMarkdownFence
	case ModeProse:
		if lenient {
			return ""
		}
		return contracts.RuleProseAroundJSON
	case ModeTrailingComma:
		return contracts.RuleNotJSON
	case ModeExtraKey:
		return "additionalProperties"
	case ModeMissingRequired:
		return "required"
	case ModeWrongLabel:
		if len(hints.Labels) > 0 {
			return "label"
		}
		return "enum"
	case ModeBadEvidence:
		return "evidence_not_found"
	case ModeTwoQuestions:
		return "questions"
	case ModeTruncated:
		return contracts.RuleOutputTruncated
	case ModeRefusal:
		return contracts.RuleModelRefusal
	case ModeEmpty:
		return contracts.RuleEmptyOutput
	case ModeDuplicateKey:
		return contracts.RuleDuplicateKey
	}
	return "?"
}

// Each forced failure mode produces the violation it stands for, on every
// contract of the demo config (the mode actually applied is the X-Sim-Mode
// one: a mode a contract cannot show falls back to missing_required), and
// hot:MODE is valid at temperature 0.
func TestFailureModesProduceTheirViolation(t *testing.T) {
	cat := loadCatalog(t, demoConfig)
	s := New(Options{Catalog: cat})
	_, cs := calls(t, demoConfig)
	for _, c := range cs {
		k := cat.Named(c.route.Contract.Name)
		for _, m := range FailureModes {
			for i := 0; i < 2; i++ {
				body, req := c.body(t, 0.7, string(m), fmt.Sprint(i))
				rep, err := s.Complete(body, req, "")
				if err != nil {
					t.Fatal(err)
				}
				if rep.Mode != m && rep.Mode != ModeMissingRequired {
					t.Fatalf("%s %s: applied %s", c.route.Name, m, rep.Mode)
				}
				if rep.Mode != m && m != ModeBadEvidence && m != ModeTwoQuestions && m != ModeWrongLabel {
					t.Fatalf("%s %s: fell back to %s", c.route.Name, m, rep.Mode)
				}
				want := expectedRule(rep.Mode, c.route.Contract, k.hints)
				rules := judge(c.route.Contract, rep, c.subjectFor())
				content := ""
				if rep.Content != nil {
					content = *rep.Content
				}
				if want == "" {
					if len(rules) > 0 {
						t.Errorf("%s %s: want accepted, got %v\n%s", c.route.Name, m, rules, content)
					}
					continue
				}
				if !slices.Contains(rules, want) {
					t.Errorf("%s %s: want %s, got %v\n%s", c.route.Name, m, want, rules, content)
				}
			}
			body, req := c.body(t, 0, "hot:"+string(m), "")
			rep, _ := s.Complete(body, req, "")
			if rules := judge(c.route.Contract, rep, c.subjectFor()); rep.Mode != ModeValid || len(rules) > 0 {
				t.Errorf("%s hot:%s at temperature 0: mode %s, violations %v", c.route.Name, m, rep.Mode, rules)
			}
		}
	}
}

// The modes the demo relies on apply to their routes without fallback.
func TestNoFallbackWhereApplicable(t *testing.T) {
	cat := loadCatalog(t, demoConfig)
	s := New(Options{Catalog: cat})
	_, cs := calls(t, demoConfig)
	want := map[string][]Mode{
		"classify-email":   {ModeBadEvidence, ModeWrongLabel},
		"extract-entities": {ModeBadEvidence, ModeWrongLabel},
		"identity-assist":  {ModeBadEvidence, ModeWrongLabel},
		"ask-one-question": {ModeTwoQuestions, ModeWrongLabel},
		"close":            {ModeTwoQuestions},
		"analyst-plan":     {ModeTwoQuestions, ModeWrongLabel},
		"guardian-report":  {ModeWrongLabel},
	}
	for _, c := range cs {
		for _, m := range want[c.route.Name] {
			for i := 0; i < 5; i++ {
				body, req := c.body(t, 0.7, string(m), fmt.Sprint(i))
				if rep, _ := s.Complete(body, req, ""); rep.Mode != m {
					t.Errorf("%s: %s fell back to %s", c.route.Name, m, rep.Mode)
				}
			}
		}
	}
}

// Auto mode fails at about the configured rate above temperature 0 and
// about ColdFactor times that at temperature 0.
func TestFewerFailuresAtTemperatureZero(t *testing.T) {
	cat := loadCatalog(t, demoConfig)
	s := New(Options{Seed: 3, Catalog: cat, FailureRate: 0.4, ColdFactor: 0.2})
	_, cs := calls(t, demoConfig)
	hot, cold, n := 0, 0, 0
	for _, c := range cs {
		for i := 0; i < 20; i++ {
			n++
			for _, temp := range []float64{0.7, 0} {
				body, req := c.body(t, temp, "", fmt.Sprint(i))
				rep, _ := s.Complete(body, req, "")
				failed := rep.Mode != ModeValid
				if rules := judge(c.route.Contract, rep, c.subjectFor()); !failed && len(rules) > 0 {
					t.Fatalf("%s: mode valid but violations %v", c.route.Name, rules)
				}
				if failed && temp > 0 {
					hot++
				} else if failed {
					cold++
				}
			}
		}
	}
	hr, cr := float64(hot)/float64(n), float64(cold)/float64(n)
	t.Logf("failure rate at 0.7: %.3f, at 0: %.3f (n=%d)", hr, cr, n)
	if hr < 0.3 || hr > 0.5 || cr > 0.15 || cr >= hr/2 {
		t.Fatalf("failure rates %.3f (hot) and %.3f (cold) are off", hr, cr)
	}
}

// The evidence source /body is recovered from the rendered user message,
// also when attempt 2 shortened it.
func TestSourceFromUserTemplate(t *testing.T) {
	cat := loadCatalog(t, demoConfig)
	k := cat.Named("classify_v1")
	body := "Hello,\n\nthe storm broke our window.\nPolicy HP-1002-3344. Anna"
	msg := "Subject: Broken window\n\n" + body + "\n"
	if got := k.sources(msg)["/body"]; got != body {
		t.Fatalf("source = %q, want %q", got, body)
	}
	short := "Subject: Broken window\n\nHello,\n\nthe storm … HP-1002-3344. Anna\n"
	src := k.sources(short)["/body"]
	if src != "Hello,\n\nthe storm … HP-1002-3344. Anna" {
		t.Fatalf("shortened source = %q", src)
	}
	rng := newTestRand()
	for i := 0; i < 200; i++ {
		s, ok := snippet(rng, src, 200)
		if !ok || !strings.Contains(body, s) {
			t.Fatalf("snippet %q is not in the original body", s)
		}
	}
}

func TestFindSchemaInProse(t *testing.T) {
	sys := `Use {this} and {"not": "a schema"} then {"type":"object","properties":{"a":{"type":"string","description":"a } brace"}},"required":["a"]} end {`
	got := findSchema(sys)
	want := `{"type":"object","properties":{"a":{"type":"string","description":"a } brace"}},"required":["a"]}`
	if string(got) != want {
		t.Fatalf("findSchema = %s", got)
	}
	if findSchema("no schema {here}") != nil {
		t.Fatal("found a schema in plain prose")
	}
}

func TestPatternGeneration(t *testing.T) {
	rng := newTestRand()
	for _, p := range []string{`^S[0-9]{1,2}$`, `^[a-z][a-z0-9]*_v[0-9]+_(markdown|json|hybrid)$`, `\S`, `^[0-9]+\.[0-9]+\.[0-9]+$`, `^[A-Z]{2}-\d{4}$`} {
		re := compilePattern(p)
		for i := 0; i < 50; i++ {
			s, ok := genFromPattern(rng, p)
			if !ok || !re.MatchString(s) {
				t.Fatalf("%s: generated %q", p, s)
			}
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		m    Mode
		hot  bool
		fail bool
	}{{"", ModeAuto, false, false}, {"valid", ModeValid, false, false}, {"hot:fence", ModeFence, true, false},
		{"trailing-comma", ModeTrailingComma, false, false}, {"nope", "", false, true}} {
		m, hot, err := ParseMode(c.in)
		if (err != nil) != c.fail || m != c.m || hot != c.hot {
			t.Errorf("ParseMode(%q) = %q, %v, %v", c.in, m, hot, err)
		}
	}
	if _, err := ParseWeights("fence=2,valid=1"); err == nil {
		t.Error("ParseWeights accepted a non-failure mode")
	}
}

// The HTTP API: completion shape, refusals, truncation, streaming, models,
// errors, and the sim_mode switches (body, header, model suffix).
func TestHandler(t *testing.T) {
	cat := loadCatalog(t, demoConfig)
	ts := httptest.NewServer(New(Options{Catalog: cat}).Handler(nil))
	defer ts.Close()
	_, cs := calls(t, demoConfig)
	var c call
	for _, x := range cs {
		if x.route.Name == "guardian-report" {
			c = x
			break
		}
	}
	post := func(path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+path, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	type completion struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      testkit.WireMessage `json:"message"`
			FinishReason string              `json:"finish_reason"`
		} `json:"choices"`
		Usage Usage `json:"usage"`
	}
	decode := func(b []byte) completion {
		var out completion
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("not a completion: %s", b)
		}
		return out
	}

	body, _ := c.body(t, 0.7, "valid", "")
	resp, b := post("/v1/chat/completions", body, nil)
	got := decode(b)
	if resp.StatusCode != 200 || got.Object != "chat.completion" || got.Choices[0].Message.Content == nil ||
		got.Choices[0].FinishReason != "stop" || got.Usage.PromptTokens < 100 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Fatalf("valid reply: %s", b)
	}
	if resp.Header.Get("X-Sim-Contract") != "guardian_report_v1" || resp.Header.Get("X-Sim-Mode") != "valid" {
		t.Fatalf("headers: %v", resp.Header)
	}

	body, _ = c.body(t, 0.7, "refusal", "")
	_, b = post("/chat/completions", body, nil)
	if got := decode(b); got.Choices[0].Message.Content != nil || got.Choices[0].Message.Refusal == nil {
		t.Fatalf("refusal reply: %s", b)
	}

	body, _ = c.body(t, 0.7, "", "")
	resp, b = post("/v1/chat/completions", body, map[string]string{"X-Sim-Mode": "truncated"})
	if got := decode(b); got.Choices[0].FinishReason != "length" || got.Usage.CompletionTokens != c.route.MaxOutputTokens {
		t.Fatalf("truncated reply: %s", b)
	}
	if resp.Header.Get("X-Sim-Mode") != "truncated" {
		t.Fatal("header X-Sim-Mode not obeyed")
	}

	var m map[string]any
	_ = json.Unmarshal(body, &m)
	m["model"] = "gpt-4o-mini+fence"
	mb, _ := json.Marshal(m)
	_, b = post("/v1/chat/completions", mb, nil)
	if got := decode(b); !strings.HasPrefix(*got.Choices[0].Message.Content, "```") {
		t.Fatalf("model suffix not obeyed: %s", b)
	}

	body, _ = c.body(t, 0.7, "valid", "")
	_ = json.Unmarshal(body, &m)
	m["stream"] = true
	m["stream_options"] = map[string]any{"include_usage": true}
	sb, _ := json.Marshal(m)
	resp, b = post("/v1/chat/completions", sb, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream content type %q", ct)
	}
	var content strings.Builder
	done, usage := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("bad chunk %q", line)
		}
		for _, c := range ch.Choices {
			content.WriteString(c.Delta.Content)
		}
		if ch.Usage != nil {
			usage = true
		}
	}
	if !done || !usage || !json.Valid([]byte(content.String())) || !utf8.ValidString(content.String()) {
		t.Fatalf("stream: done %v usage %v content %q", done, usage, content.String())
	}

	resp, _ = post("/v1/chat/completions", []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}],"sim_mode":"bogus"}`), nil)
	if resp.StatusCode != 400 {
		t.Fatalf("unknown sim_mode: %d", resp.StatusCode)
	}
	resp, _ = post("/v1/chat/completions", []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}],"sim_mode":"http_429"}`), nil)
	if resp.StatusCode != 429 {
		t.Fatalf("http_429: %d", resp.StatusCode)
	}
	resp, _ = post("/v1/chat/completions", []byte(`{not json`), nil)
	if resp.StatusCode != 400 {
		t.Fatalf("bad JSON: %d", resp.StatusCode)
	}
	resp, b = post("/v1/chat/completions", []byte(`{"model":"x","messages":[{"role":"user","content":"hello there"}]}`), nil)
	if got := decode(b); resp.StatusCode != 200 || got.Choices[0].Message.Content == nil || *got.Choices[0].Message.Content == "" {
		t.Fatalf("plain chat: %s", b)
	}

	r, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.NewDecoder(r.Body).Decode(&models)
	r.Body.Close()
	if models.Object != "list" || len(models.Data) == 0 {
		t.Fatalf("models: %+v", models)
	}
}

// The catalog accepts every example config.
func TestLoadCatalog(t *testing.T) {
	for _, p := range append(exampleConfigs(t), demoConfig) {
		cat, err := LoadCatalog(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		rt, _ := config.Load(p)
		if len(cat.Contracts()) != len(rt.Contracts) {
			t.Fatalf("%s: %d contracts, config has %d", p, len(cat.Contracts()), len(rt.Contracts))
		}
	}
}

// Odd schemas never hang or panic: recursion, boolean subschemas, a
// top-level array, an unsatisfiable pattern.
func TestOddSchemas(t *testing.T) {
	s := New(Options{})
	for _, schema := range []string{
		`{"type":"object","required":["node"],"properties":{"node":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"a":true,"b":{"type":"array","items":false}},"required":["a","b"]}`,
		`{"type":"array","items":{"type":"integer","minimum":3,"maximum":3},"minItems":2}`,
		`{"type":"object","required":["x"],"properties":{"x":{"type":"string","pattern":"(?<=a)b","minLength":2}}}`,
		`{"oneOf":[{"type":"string"},{"type":"number"}]}`,
	} {
		for _, mode := range append([]Mode{ModeValid}, FailureModes...) {
			body := fmt.Appendf(nil, `{"model":"m","sim_mode":%q,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":%s}}}`, mode, schema)
			complete(t, s, body)
		}
	}
}
