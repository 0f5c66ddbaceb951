package proxy

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

// answer_v1, the "free" route's contract schema, as the config spells it.
const answerSchema = `{"type":"object","required":["answer"],"additionalProperties":false,"properties":{"answer":{"type":"string"}}}`

func chatWithFormat(rf string) string {
	body := `{"model":"free","messages":[` + userHi + `]`
	if rf != "" {
		body += `,"response_format":` + rf
	}
	return body + `}`
}

func clientJSONSchema(schema string) string {
	return `{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":` + schema + `}}`
}

// X-Contract-Schema-Replaced says the client's json_schema is not the
// route's contract schema, on both edges, on every outcome; it never
// blocks. Spellings of the same schema (key order, annotations a
// converter adds, set order) are the same schema.
func TestSchemaReplacedHeader(t *testing.T) {
	zodSpelling := `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Answer","type":"object",` +
		`"properties":{"answer":{"type":"string","description":"the answer"}},"required":["answer"],"additionalProperties":false}`
	cases := []struct {
		name, rf string
		replaced bool
	}{
		{"no response_format", "", false},
		{"json_object", `{"type":"json_object"}`, false},
		{"text", `{"type":"text"}`, false},
		{"the route's schema", clientJSONSchema(answerSchema), false},
		{"the same schema spelled by a converter", clientJSONSchema(zodSpelling), false},
		{"an extra property", clientJSONSchema(`{"type":"object","required":["answer"],"additionalProperties":false,"properties":{"answer":{"type":"string"},"why":{"type":"string"}}}`), true},
		{"another type", clientJSONSchema(`{"type":"object","required":["answer"],"additionalProperties":false,"properties":{"answer":{"type":"number"}}}`), true},
		{"optional where the contract requires", clientJSONSchema(`{"type":"object","additionalProperties":false,"properties":{"answer":{"type":"string"}}}`), true},
		{"a property named title is not an annotation", clientJSONSchema(`{"type":"object","required":["answer"],"additionalProperties":false,"properties":{"answer":{"type":"string"},"title":{"type":"string"}}}`), true},
		{"json_schema without a schema", `{"type":"json_schema","json_schema":{"name":"x"}}`, true},
	}
	for _, up := range []struct {
		name    string
		content string
		status  int
	}{{"valid", validAnswer, 200}, {"needs_review", invalidAnswer, 422}} {
		h := newHarness(t, always(up.content), cfg{})
		rt := *h.rt
		rt.Review.DedupeWindow = 0
		h.srv.Swap(&rt)
		for _, c := range cases {
			chat := h.post("", chatWithFormat(c.rf))
			// the Responses edge carries the format in text.format
			resp := `{"model":"free","input":"hi"}`
			if c.rf != "" {
				var rf map[string]any
				_ = json.Unmarshal([]byte(c.rf), &rf)
				format := map[string]any{"type": rf["type"]}
				if js, ok := rf["json_schema"].(map[string]any); ok {
					for k, v := range js {
						format[k] = v
					}
				}
				b, _ := json.Marshal(map[string]any{"model": "free", "input": "hi", "text": map[string]any{"format": format}})
				resp = string(b)
			}
			for edge, r := range map[string]*result{"chat": chat, "responses": h.post(respPath, resp)} {
				want := ""
				if c.replaced {
					want = "true"
				}
				if r.Status != up.status || r.Header.Get("X-Contract-Schema-Replaced") != want {
					t.Errorf("%s, %s, %s: status %d, X-Contract-Schema-Replaced %q, want %d %q: %s", up.name, c.name, edge,
						r.Status, r.Header.Get("X-Contract-Schema-Replaced"), up.status, want, r.Body)
				}
			}
		}
	}
}

// The upstream still gets the route's format: the header reports, it does
// not change what is sent.
func TestSchemaReplacedSendsTheRoutes(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	other := `{"type":"object","properties":{"x":{"type":"integer"}}}`
	r := h.post("", `{"model":"free-drop","messages":[`+userHi+`],"response_format":`+clientJSONSchema(other)+`}`)
	if r.Status != 200 || r.Header.Get("X-Contract-Schema-Replaced") != "true" {
		t.Fatalf("%d %v %s", r.Status, r.Header, r.Body)
	}
	calls := h.up.Calls()
	c := calls[len(calls)-1]
	k := h.rt.Routes["free-drop"].Contract
	if !strings.Contains(string(c.Body), `"schema":`+string(k.Schema.JSON())) || strings.Contains(string(c.Body), `"x"`) {
		t.Fatalf("upstream body %s", c.Body)
	}
}

// The warning is logged once per (route, client schema), not per request,
// and the set it is kept in is bounded.
func TestSchemaReplacedWarnsOnce(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	logs := &testkit.SyncBuffer{}
	h.srv.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	a := clientJSONSchema(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	b := clientJSONSchema(`{"type":"object","properties":{"b":{"type":"string"}}}`)
	for i := 0; i < 3; i++ {
		h.post("", chatWithFormat(a))
		h.post(respPath, `{"model":"free","input":"hi","text":{"format":{"type":"json_schema","name":"a","schema":{"properties":{"a":{"type":"string"}},"type":"object"}}}}`)
	}
	h.post("", chatWithFormat(b))
	h.post("", strings.Replace(chatWithFormat(a), `"model":"free"`, `"model":"tight"`, 1))
	var warnings []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["level"] == "WARN" && strings.Contains(fmt.Sprint(m["msg"]), "json_schema differs") {
			warnings = append(warnings, m)
		}
	}
	got := []string{}
	for _, w := range warnings {
		got = append(got, fmt.Sprint(w["route"]))
		if len(fmt.Sprint(w["client_schema_sha256"])) != 64 || w["contract"] != "answer_v1" {
			t.Errorf("warning %v", w)
		}
	}
	if strings.Join(got, ",") != "free,free,tight" {
		t.Fatalf("warnings for routes %v, want free (a), free (b), tight (a):\n%s", got, logs.String())
	}

	var n schemaNotes
	for i := 0; i < 5*maxSchemaNotes; i++ {
		if !n.first("r", sha256.Sum256([]byte(fmt.Sprint(i)))) {
			t.Fatal("a new schema was taken as seen")
		}
		if len(n.warned) > maxSchemaNotes {
			t.Fatalf("%d entries", len(n.warned))
		}
	}
}

func TestNormSchema(t *testing.T) {
	same := [][2]string{
		{answerSchema, `{"properties":{"answer":{"type":"string"}},"additionalProperties":false,"required":["answer"],"type":"object"}`},
		{`{"required":["a","b"],"type":["string","null"]}`, `{"required":["b","a"],"type":["null","string"],"description":"d"}`},
		{`{"items":{"type":"integer"}}`, `{"items":{"type":"integer","title":"n"}}`},
		{`{"anyOf":[{"type":"string"},{"type":"null"}]}`, `{"anyOf":[{"type":"string","$comment":"c"},{"type":"null"}]}`},
		{`{"maxLength":200}`, `{"maxLength":200.0}`},
	}
	for _, p := range same {
		if schemaSum([]byte(p[0])) != schemaSum([]byte(p[1])) {
			t.Errorf("differ: %s %s", p[0], p[1])
		}
	}
	differ := [][2]string{
		{`{"anyOf":[{"type":"string"},{"type":"null"}]}`, `{"anyOf":[{"type":"null"},{"type":"string"}]}`}, // order kept where it is not a set
		{`{"enum":["a","b"]}`, `{"enum":["b","a"]}`},
		{`{"const":{"title":"x"}}`, `{"const":{}}`}, // data, not annotations
		{`{"properties":{"description":{"type":"string"}}}`, `{"properties":{}}`},
	}
	for _, p := range differ {
		if schemaSum([]byte(p[0])) == schemaSum([]byte(p[1])) {
			t.Errorf("same: %s %s", p[0], p[1])
		}
	}
}

// FuzzSchemaSum: any client response_format is read without a panic; a
// schema's normal form is stable (normalising twice changes nothing) and
// does not depend on member order.
func FuzzSchemaSum(f *testing.F) {
	f.Add([]byte(answerSchema))
	f.Add([]byte(`{"$schema":"x","properties":{"title":{"type":["null","string"],"description":"d"}},"required":["b","a"],"anyOf":[{"items":[{"const":1}]}]}`))
	f.Add([]byte(`{"items":{"items":{"items":{}}},"enum":[{"title":1}],"not":true}`))
	f.Add([]byte(`[1,"a",null]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = schemaSum(b)
		obj := object{{Name: "response_format", Value: []byte(`{"type":"json_schema","json_schema":{"schema":` + string(b) + `}}`)}}
		_, _ = clientSchema(obj)
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		once, _ := json.Marshal(normSchema(v))
		var again any
		if err := json.Unmarshal(once, &again); err != nil {
			t.Fatal(err)
		}
		twice, _ := json.Marshal(normSchema(again))
		if string(once) != string(twice) {
			t.Fatalf("not stable:\n%s\n%s", once, twice)
		}
		if m, ok := v.(map[string]any); ok && len(m) > 1 {
			// the same members in another order: json.Marshal of the map is the reordering
			re, _ := json.Marshal(m)
			if schemaSum(re) != schemaSum(b) {
				t.Fatalf("member order changed the sum: %s", b)
			}
		}
	})
}
