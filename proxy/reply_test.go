package proxy

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	openai "github.com/sashabaranov/go-openai"

	"github.com/contractd/contractd/internal/jsonstr"
	"github.com/contractd/contractd/internal/testkit"
)

// wireCompletion is the part of a chat completion the pipeline reads, as
// json v2 unmarshals it: the reference readCompletion's walk must agree
// with (it replaced this, which cost three times its allocations).
type wireCompletion struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []struct {
		Message      testkit.WireMessage `json:"message"`
		FinishReason *string             `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func readCompletionV2(data []byte) (*Completion, bool) {
	var w wireCompletion
	if err := jsonv2.Unmarshal(data, &w, wireOptions); err != nil || len(w.Choices) == 0 || w.Object == "chat.completion.chunk" {
		return nil, false
	}
	ch := w.Choices[0]
	c := &Completion{}
	if ch.Message.Content != nil {
		c.Output = *ch.Message.Content
	}
	if ch.Message.Refusal != nil {
		c.Refusal = *ch.Message.Refusal
	}
	if ch.FinishReason != nil {
		c.Finish = *ch.FinishReason
	}
	c.choice[0] = openai.ChatCompletionChoice{Message: openai.ChatCompletionMessage{Role: ch.Message.Role,
		Content: c.Output, Refusal: c.Refusal}, FinishReason: openai.FinishReason(c.Finish)}
	c.Resp = openai.ChatCompletionResponse{ID: w.ID, Object: w.Object, Created: w.Created, Model: w.Model,
		SystemFingerprint: w.SystemFingerprint, Choices: c.choice[:]}
	if w.Usage != nil {
		c.Resp.Usage = openai.Usage{PromptTokens: w.Usage.PromptTokens, CompletionTokens: w.Usage.CompletionTokens, TotalTokens: w.Usage.TotalTokens}
	}
	return c, true
}

// FuzzReadCompletionAgrees holds the reply walk to json v2 unmarshalling
// into wireCompletion, which it replaced: the same verdict on every input
// and, when both read a completion, the same completion.
func FuzzReadCompletionAgrees(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"a\":1}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7},"extra":{"x":[1]}}`,
		`{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":null,"refusal":"no"},"finish_reason":"stop"}]}`,
		"{\"choices\":[{\"message\":{\"content\":\"\xff\"},\"finish_reason\":\"stop\"}]}",
		`{"choices":[{"message":{"content":"a\u0000b\ud800"},"finish_reason":null}],"choices":[]}`,
		`{"choices":[{"message":{"content":"x"}}],"choices":[{"finish_reason":"stop"},{"message":{"content":1}}]}`,
		`{"choices":[{"message":{"role":"r"},"message":{"content":"c"}},null]}`,
		`{"choices":[null],"usage":{"prompt_tokens":1},"usage":{"total_tokens":2}}`,
		`{"choices":[{}],"usage":{"total_tokens":1},"usage":null,"created":-0}`,
		`{"choices":[{}],"created":1e3}`, `{"choices":[{}],"created":1.0}`, `{"choices":[{}],"created":9223372036854775808}`,
		`{"choices":[{}],"created":"1"}`, `{"choices":[{}],"id":1}`, `{"choices":{}}`, `{"choices":[1]}`,
		`{"Choices":[{}]}`, `{"choi\u0063es":[{}]}`, `{"choices":[{}]} x`, `{"choices":[{}]}{}`, `null`, `[]`, `"s"`, ``,
		`{"choices":[{"message":null}],"object":"chat.completion.chunk"}`, `{"choices":[{}],"object":null,"model":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := readCompletion(b)
		want, wantOK := readCompletionV2(b)
		if ok != wantOK {
			t.Fatalf("%q: read %v, json v2 %v", b, ok, wantOK)
		}
		if !ok {
			return
		}
		// The walk also keeps the content's literal when Append writes
		// it back the same (json v2 has no such field).
		if got.quoted != nil && !bytes.Equal(got.quoted, jsonstr.Append(nil, got.Output)) {
			t.Fatalf("%q: quoted %s, but Append writes %s", b, got.quoted, jsonstr.Append(nil, got.Output))
		}
		g := *got
		g.quoted = nil
		if !reflect.DeepEqual(&g, want) {
			t.Fatalf("%q:\n walk    %+v\n json v2 %+v", b, &g, want)
		}
	})
}

// BenchmarkReadCompletion reads a chat completion whose content is 1.5 KB
// of JSON (a model's structured output: one long string, dense with
// escapes), as the contract route reads every upstream reply.
func BenchmarkReadCompletion(b *testing.B) {
	obj := `{"order":{"id":"A-1","items":[` + strings.Repeat(`{"sku":"bcdefghij","qty":12345,"price":1.25,"tags":["x","y"]},`, 20) +
		`{"sku":"z","qty":1,"price":2,"tags":[]}],"paid":true,"note":"tab\tnew\nline"}}`
	reply := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":` + string(jsonstr.Append(nil, obj)) +
		`},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`)
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		c, ok := readCompletion(reply)
		if !ok || c.Output != obj || c.quoted == nil {
			b.Fatal("not read")
		}
	}
}
