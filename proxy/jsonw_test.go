package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/jsonstr"
	openai "github.com/sashabaranov/go-openai"
)

// jsonStrings are strings whose quoting differs between encoders: HTML
// characters (not escaped), control bytes with and without short forms,
// U+2028/U+2029, invalid UTF-8, multi-byte runes, quotes and backslashes.
var jsonStrings = []string{
	"", "plain", `{"a":"<b>&amp;</b>"}`, "tab\there\nnew\rret\bback\fform", "\x00\x01\x1f\x7f",
	"line\u2028para\u2029end", "bad \xff\xfe utf8 \xc3", "ü日本語🙂", `quote " and \ backslash`, "\u00e9\u0301",
	"trailing \xe2\x80", "<script>alert(1)</script>",
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStrings {
		want := string(mustJSON(s))
		if got := string(jsonstr.Append(nil, s)); got != want {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
		if got := string(appendJSONBytesAsString(nil, []byte(s))); got != want {
			t.Errorf("%q as bytes: got %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := jsonstr.Append(nil, s), mustJSON(s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// TestAppendChatSuccessMatches: the appended success body is byte for byte
// the encoding/json encoding of successBody, and writeBody sends it with
// its Content-Length in one write.
func TestAppendChatSuccessMatches(t *testing.T) {
	route := &config.Route{Name: "classify<x>"}
	k := &contracts.Contract{Name: "c_v1", SHA256: "ab12"}
	for i, tt := range []struct {
		resp     openai.ChatCompletionResponse
		out      string
		evidence []contracts.Evidence
		attempts int
	}{
		{openai.ChatCompletionResponse{ID: "chatcmpl-1", Created: 1726560000, Model: "gpt-x", SystemFingerprint: "fp_1"},
			`{"intent":"<b>billing</b> & more","n":1}`, []contracts.Evidence{{Path: "/quote", Start: 3, End: 9, SHA256: "ff"}, {Path: "/a~1b", Start: 0, End: 1, SHA256: "00"}}, 2},
		{openai.ChatCompletionResponse{Created: 5}, "{\"s\":\"tab\\t\u2028 \xff\"}", nil, 1},
		{openai.ChatCompletionResponse{ID: "x\"y", Created: 7, Model: "m\u2029"}, `{}`, []contracts.Evidence{}, 3},
	} {
		ev := tt.evidence
		v := &verdict{comp: &Completion{Resp: tt.resp}, result: contracts.Result{JSON: []byte(tt.out), Evidence: ev},
			usage: audit.Usage{PromptTokens: 10, CompletionTokens: 20 + i, TotalTokens: 30 + i}, attempts: make([]ReviewAttempt, tt.attempts)}
		want := append(mustJSON(successBody(v, route, k)), '\n')
		got := appendChatSuccess(nil, v, route, k)
		if !bytes.Equal(got, want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
		rec := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
		writeBody(rec, 200, func(b []byte) []byte { return appendChatSuccess(b, v, route, k) })
		if rec.writes != 1 || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) || !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("case %d: %d writes, Content-Length %s for %d bytes", i, rec.writes, rec.Header().Get("Content-Length"), len(want))
		}
	}
}

// TestAppendResponseSuccessMatches: the Responses edge's appended success
// body is byte for byte the encoding/json encoding of responseBody, sent
// in one write with its Content-Length.
func TestAppendResponseSuccessMatches(t *testing.T) {
	k := &contracts.Contract{Name: "c_v1", SHA256: "ab12"}
	route := &config.Route{Name: "classify<x>", Contract: k}
	for i, tt := range []struct {
		resp     openai.ChatCompletionResponse
		id, out  string
		evidence []contracts.Evidence
		attempts int
		body     string // the client's request: metadata and top_p echo
	}{
		{openai.ChatCompletionResponse{ID: "chatcmpl-1", Created: 1726560000, Model: "gpt-x", SystemFingerprint: "fp_1"}, "req_0123abcd",
			`{"intent":"<b>billing</b> & more","n":1}`, []contracts.Evidence{{Path: "/quote", Start: 3, End: 9, SHA256: "ff"}, {Path: "/a~1b", Start: 0, End: 1, SHA256: "00"}}, 2,
			`{"metadata":{"team":"a<b>&c","k":"\u00e9"},"top_p":0.9e0}`},
		{openai.ChatCompletionResponse{Created: 5}, "", "{\"s\":\"tab\\t\u2028 \xff\"}", nil, 1, `{"metadata":null,"top_p":null}`},
		{openai.ChatCompletionResponse{ID: "x\"y", Created: 7, Model: "m\u2029"}, "q\"<\u2028\xff", `{}`, []contracts.Evidence{}, 3, `{}`},
		{openai.ChatCompletionResponse{Created: 9, Model: "m"}, "r", `{}`, nil, 0, `{"metadata":{},"top_p":1}`},
	} {
		v := &verdict{comp: &Completion{Resp: tt.resp}, result: contracts.Result{JSON: []byte(tt.out), Evidence: tt.evidence},
			usage: audit.Usage{PromptTokens: 10, CompletionTokens: 20 + i, TotalTokens: 30 + i}, attempts: make([]ReviewAttempt, tt.attempts)}
		for j := range v.attempts {
			v.attempts[j].Temperature = 0.35 * float64(j+i)
		}
		obj, err := parseObject([]byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		p := &Prepared{body: obj}
		want := append(mustJSON(responseBody(v, route, tt.id, p)), '\n')
		if got := appendResponseSuccess(nil, v, route, tt.id, p); !bytes.Equal(got, want) {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
		rec := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
		writeResponse(rec, v, route, tt.id, p)
		if rec.writes != 1 || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) || !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("case %d: %d writes, Content-Length %s for %d bytes", i, rec.writes, rec.Header().Get("Content-Length"), len(want))
		}
	}
}

// countingWriter counts Write and Flush calls on a recorder.
type countingWriter struct {
	*httptest.ResponseRecorder
	writes, flushes int
}

func (c *countingWriter) Write(b []byte) (int, error) { c.writes++; return c.ResponseRecorder.Write(b) }
func (c *countingWriter) Flush()                      { c.flushes++; c.ResponseRecorder.Flush() }

// FuzzAppendOutputQuotedAsReplied: whatever string literal the reply
// carries its content in, and whatever JSON whitespace surrounds the
// accepted part, the answer quotes the output exactly as jsonstr.Append
// does, whether it copies the reply's literal (Completion.quoted) or
// quotes the output itself.
func FuzzAppendOutputQuotedAsReplied(f *testing.F) {
	for _, lit := range []string{`"{\"a\":1}"`, `" \n{\"a\":\"b\\\\c\"}\t\r\n "`, `"{\"a\":\"\u00e9\"}"`, `"{\"a\":\"\/\"}"`,
		`"\n\n"`, `"x"`, `""`, `"{\"s\":\"tab\\t\u2028\"}\n"`, "\"{\\\"a\\\":\\\"\u2028\\\"} \"", `" {\"a\":\"\u001B\"} "`} {
		f.Add([]byte(lit), uint8(0))
		f.Add([]byte(lit), uint8(3))
	}
	f.Fuzz(func(t *testing.T, lit []byte, cut uint8) {
		reply := append([]byte(`{"object":"chat.completion","choices":[{"message":{"content":`), lit...)
		reply = append(reply, `},"finish_reason":"stop"}]}`...)
		c, ok := readCompletion(reply)
		if !ok || len(c.Output) == 0 {
			return
		}
		// The accepted part: the output with its JSON whitespace trimmed
		// (strict extraction), or, for cut's low bit, one byte less at
		// each end (not whitespace: the literal is not used).
		out := unsafe.Slice(unsafe.StringData(c.Output), len(c.Output))
		out = bytes.Trim(out, " \t\n\r")
		if cut&1 == 1 && len(out) > 2 {
			out = out[1 : len(out)-1]
		}
		if len(out) == 0 {
			return
		}
		if c.quoted != nil {
			if want := jsonstr.Append(nil, c.Output); !bytes.Equal(c.quoted, want) {
				t.Fatalf("quoted %s, Append writes %s", c.quoted, want)
			}
		}
		v := &verdict{comp: c, result: contracts.Result{JSON: out}}
		if got, want := appendOutput(nil, v), jsonstr.Append(nil, string(out)); !bytes.Equal(got, want) {
			t.Fatalf("literal %s, output %q: got %s, want %s", lit, out, got, want)
		}
	})
}

// TestReplyKeepsQuotedContent: a reply whose content literal is what
// Append writes keeps it, so the answer copies it; one with any other
// escape keeps none, and the answer quotes the output itself.
func TestReplyKeepsQuotedContent(t *testing.T) {
	for _, tt := range []struct {
		lit  string
		kept bool
	}{
		{`"{\"a\":\"b\\\\c\",\"t\":\"x\\ty\"}"`, true},
		{`"\n{\"a\":1}\n"`, true},
		{`"{\"a\":\"\/\"}"`, false},
		{`"{\"a\":\"\u00e9\"}"`, false},
		{`"{\"a\":\"\u001B\"}"`, false},
	} {
		c, ok := readCompletion([]byte(`{"choices":[{"message":{"content":` + tt.lit + `}}]}`))
		if !ok {
			t.Fatalf("%s: not read", tt.lit)
		}
		if kept := c.quoted != nil; kept != tt.kept {
			t.Errorf("%s: kept %v, want %v", tt.lit, kept, tt.kept)
		}
		// Kept, it is the reply's own bytes, not a copy of them.
		if c.quoted != nil && !bytes.Equal(c.quoted, []byte(tt.lit)) {
			t.Errorf("%s: kept %s", tt.lit, c.quoted)
		}
	}
	reply := []byte(`{"choices":[{"message":{"content":"{\"a\":1}"}}]}`)
	c, ok := readCompletion(reply)
	if !ok || c.quoted == nil {
		t.Fatal("literal not kept")
	}
	if at := bytes.Index(reply, []byte(`"{\"a\":1}"`)); &c.quoted[0] != &reply[at] {
		t.Error("the kept literal is a copy of the reply's")
	}
}

// TestConcurrentAnswersKeepTheirReplies: the content's literal is read
// from the reply's pooled buffer when the answer is written, so that
// buffer goes back to its pool only afterwards. Were it given back
// earlier, another request's reply would be read into it meanwhile and
// answered in its place: many requests at once, each answered with its
// own upstream reply.
func TestConcurrentAnswersKeepTheirReplies(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		msgs := c.Messages()
		tok, _ := msgs[len(msgs)-1]["content"].(string)
		reply(w, 200, completion(`{"answer":"`+tok+` `+strings.Repeat("x", 200)+`"}`, "stop", 10, 5))
	}, cfg{})
	const clients, each = 16, 40
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			for i := range each {
				tok := fmt.Sprintf("tok-%d-%d", g, i)
				body := `{"model":"free","messages":[{"role":"user","content":"` + tok + `"}]}`
				req, err := http.NewRequest(http.MethodPost, h.front.URL+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+clientKey)
				resp, err := h.client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Error(err)
					return
				}
				var got struct {
					Choices []struct {
						Message struct{ Content string } `json:"message"`
					} `json:"choices"`
				}
				want := `{"answer":"` + tok + ` ` + strings.Repeat("x", 200) + `"}`
				if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || len(got.Choices) != 1 || got.Choices[0].Message.Content != want {
					t.Errorf("%s: HTTP %d, %.200s", tok, resp.StatusCode, b)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkAppendOutput: the accepted output of a reply read from the
// wire, a 1.5 KB JSON object, quoted into the answer: copied from the
// reply's literal, and quoted again (the reply's literal not kept).
func BenchmarkAppendOutput(b *testing.B) {
	obj := `{"ticket_id":"TCK-20240917-0042","category":"billing","priority":2,"sentiment":{"label":"negative","score":0.82},` +
		`"entities":[{"type":"order","text":"ORD-99812","confidence":0.98},{"type":"amount","text":"EUR 129.00","confidence":0.95}],` +
		`"actions":[{"step":1,"owner":"billing","description":"Confirm the duplicate charge of EUR 129.00 on order ORD-99812.","due_hours":4}],` +
		`"summary":"A gold-tier customer was charged twice for the Pro annual plan renewal and asks for the duplicate to be refunded."}`
	content := jsonstr.Append(nil, strings.Repeat(obj, 3))
	c, ok := readCompletion([]byte(`{"choices":[{"message":{"content":` + string(content) + `}}]}`))
	if !ok || c.quoted == nil {
		b.Fatal("reply not read, or its content literal not kept")
	}
	out := unsafe.Slice(unsafe.StringData(c.Output), len(c.Output))
	for _, tt := range []struct {
		name   string
		quoted []byte
	}{{"literal", c.quoted}, {"quoted", nil}} {
		b.Run(tt.name, func(b *testing.B) {
			cc := *c
			cc.quoted = tt.quoted
			v := &verdict{comp: &cc, result: contracts.Result{JSON: out}}
			b.SetBytes(int64(len(out)))
			var dst []byte
			for b.Loop() {
				dst = appendOutput(dst[:0], v)
			}
		})
	}
}

// BenchmarkAppendSuccess: an accepted verdict's answer body, chat and
// Responses, with a short output and two evidence spans (the members
// around the output, which BenchmarkAppendOutput leaves out).
func BenchmarkAppendSuccess(b *testing.B) {
	k := &contracts.Contract{Name: "support_ticket_v1", SHA256: strings.Repeat("ab", 32)}
	route := &config.Route{Name: "classify-ticket", Contract: k}
	v := &verdict{comp: &Completion{Resp: openai.ChatCompletionResponse{ID: "chatcmpl-9aZx1", Created: 1726560000, Model: "gpt-4o-mini-2024-07-18", SystemFingerprint: "fp_0aa8d3e20b"}},
		result: contracts.Result{JSON: []byte(`{"category":"billing","priority":2,"quote":"charged twice"}`),
			Evidence: []contracts.Evidence{{Path: "/quote", Start: 31, End: 44, SHA256: strings.Repeat("cd", 32)}, {Path: "/category", Start: 0, End: 7, SHA256: strings.Repeat("ef", 32)}}},
		usage: audit.Usage{PromptTokens: 412, CompletionTokens: 38, TotalTokens: 450}, attempts: make([]ReviewAttempt, 1)}
	obj, err := parseObject([]byte(`{"model":"gpt-4o-mini","metadata":{"team":"support"},"top_p":0.9}`))
	if err != nil {
		b.Fatal(err)
	}
	p := &Prepared{body: obj}
	var dst []byte
	b.Run("chat", func(b *testing.B) {
		for b.Loop() {
			dst = appendChatSuccess(dst[:0], v, route, k)
		}
	})
	b.Run("responses", func(b *testing.B) {
		for b.Loop() {
			dst = appendResponseSuccess(dst[:0], v, route, "req_4ade5c6d0c1fa600b01d5098", p)
		}
	})
}
