package proxy

// FuzzRequestReader: the request reader (parseObject, Prepare, Build) never
// panics on arbitrary bytes; a parsed object re-serialised with no edits is
// the same JSON, byte for byte but for whitespace; and every body Build makes is valid JSON carrying the
// route's model with each client-owned member byte for byte.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/contractd/contractd/config"
	"github.com/go-json-experiment/json/jsontext"
)

// routeOwned are the members the route sets or removes.
var routeOwned = map[string]bool{
	"model": true, "messages": true, "temperature": true, "max_tokens": true, "max_completion_tokens": true,
	"seed": true, "stream": true, "response_format": true, "stream_options": true, "n": true, "contract_input": true,
}

var (
	fuzzOnce sync.Once
	fuzzRT   *config.Runtime
)

func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func FuzzRequestReader(f *testing.F) {
	fuzzOnce.Do(func() { fuzzRT = loadRuntime(f, "http://127.0.0.1:1/v1", cfg{}) })
	for _, s := range []string{
		vendorBody, classifyReq, freeReq,
		`{}`, `{"a":1} x`, `{"a":1,"a":2}`, `[]`, `"x"`, `{"model":"free","messages":[{"role":"system","content":"x"}]}`,
		`{"model":"free","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}]}`,
		`{"model":"classify","contract_input":{"subject":"\u00e9","body":"a b c d e f g h"}}`,
		`{"\u006dodel":"free","messages":[{"role":"user","content":"hi"}],"x":-0.0e-0}`,
		"{\"model\":\"free\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
		`{"model":"free","n":1.0,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := parseObject(data)
		if err == nil {
			if !json.Valid(data) {
				t.Fatalf("parseObject accepted invalid JSON %q", data)
			}
			out := obj.apply(nil)
			a, err1 := decodeNumbers(data)
			b, err2 := decodeNumbers(out)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("apply(nil) changed the object:\n in %q\nout %q (%v, %v)", data, out, err1, err2)
			}
			// Byte for byte but for whitespace between tokens: names and
			// values keep their escapes and number spellings.
			want, got := jsontext.Value(bytes.Clone(data)), jsontext.Value(bytes.Clone(out))
			if want.Compact() != nil || got.Compact() != nil || !bytes.Equal(want, got) {
				t.Fatalf("apply(nil) is not the input, compacted:\n in %q\nout %q", data, out)
			}
			again, err := parseObject(out)
			if err != nil || !bytes.Equal(again.apply(nil), out) {
				t.Fatalf("apply(nil) is not stable: %q", out)
			}
		}
		for _, name := range []string{"classify", "free", "free-drop"} {
			r := fuzzRT.Routes[name]
			p, aerr := Prepare(r, data)
			if aerr != nil {
				if aerr.Status != 400 || aerr.Type != typeInvalidRequest {
					t.Fatalf("Prepare error %+v", aerr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Prepare accepted what parseObject rejects: %q", data)
			}
			for _, a := range r.Plan {
				ab, aerr := p.Build(a)
				if aerr != nil {
					if aerr.Status != 400 {
						t.Fatalf("Build error %+v", aerr)
					}
					break
				}
				sent, perr := parseObject(ab.Body)
				if perr != nil || !json.Valid(ab.Body) {
					t.Fatalf("Build made invalid JSON from %q: %q", data, ab.Body)
				}
				if m, _ := sent.get("model"); string(m) != string(mustJSON(r.Model)) {
					t.Fatalf("model %s", m)
				}
				for _, k := range []string{"n", "stream_options", "contract_input"} {
					if _, ok := sent.get(k); ok {
						t.Fatalf("%s forwarded", k)
					}
				}
				for _, m := range obj {
					if routeOwned[m.Name] {
						continue
					}
					if v, ok := sent.get(m.Name); !ok || !bytes.Equal(v, m.Value) {
						t.Fatalf("member %q not forwarded byte for byte: %s vs %s", m.Name, v, m.Value)
					}
				}
			}
		}
		if err == nil {
			if out, rerr := Render(fuzzRT.Routes["raw"], data, 1); rerr != nil || !json.Valid(out) {
				t.Fatalf("passthrough render %q: %v", out, rerr)
			}
		}
	})
}

// FuzzResponsesRequest: the Responses request reader never panics; what it
// accepts becomes a chat request whose messages are a JSON array, that the
// shared pipeline can prepare, and that carries no Responses-only member.
func FuzzResponsesRequest(f *testing.F) {
	fuzzOnce.Do(func() { fuzzRT = loadRuntime(f, "http://127.0.0.1:1/v1", cfg{}) })
	for _, s := range []string{
		`{"model":"free","input":"hi"}`, `{"model":"free","input":[]}`, `{"model":"free","input":42}`,
		`{"model":"free-drop","instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}]}`,
		`{"model":"free","input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},{"role":"user","content":"b"}]}`,
		`{"model":"free","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`,
		`{"model":"free","input":"q","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}}}`,
		`{"model":"classify","input":[],"contract_input":{"subject":"s","body":"b"}}`,
		`{"model":"free","input":"q","tools":[],"store":true,"max_output_tokens":5}`,
		"{\"model\":\"free\",\"input\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, err := parseObject(body)
		if err != nil {
			return
		}
		for _, name := range []string{"free", "free-drop", "classify"} {
			route := fuzzRT.Routes[name]
			chat, msgs, aerr := responsesToChat(route, obj)
			if aerr != nil {
				if aerr.Status != 400 || aerr.Code == "" {
					t.Fatalf("%s: error %+v", name, aerr)
				}
				continue
			}
			out := chat.apply(nil)
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("%s: mapped body is not JSON: %v\n%s", name, err, out)
			}
			if msgs := bytes.TrimSpace(m["messages"]); len(msgs) == 0 || msgs[0] != '[' {
				t.Fatalf("%s: messages %s", name, msgs)
			}
			for _, k := range []string{"input", "instructions", "text", "store", "max_output_tokens", "tools"} {
				if _, ok := m[k]; ok {
					t.Fatalf("%s: %s survived: %s", name, k, out)
				}
			}
			// The messages the adapter hands over are what the chat reader
			// reads from the messages JSON it built.
			reread, rerr := readMessages(chat)
			if rerr != nil || len(reread) != len(msgs) {
				t.Fatalf("%s: %d messages handed over, chat reader: %d %v\n%s", name, len(msgs), len(reread), rerr, out)
			}
			for i := range msgs {
				a, b := msgs[i], reread[i]
				if a.Role != b.Role || a.Content != b.Content || a.IsString != b.IsString || !bytes.Equal(a.Raw, b.Raw) {
					t.Fatalf("%s: message %d: adapter %+v, chat reader %+v", name, i, a, b)
				}
			}
			p, aerr := prepare(route, chat, msgs)
			if aerr != nil {
				continue
			}
			if ab, aerr := p.Build(route.Plan[0]); aerr == nil && !json.Valid(ab.Body) {
				t.Fatalf("%s: upstream body is not JSON: %s", name, ab.Body)
			}
		}
	})
}
