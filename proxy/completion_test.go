package proxy

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestReadCompletion(t *testing.T) {
	tests := []struct {
		name, body              string
		ok                      bool
		output, finish, refusal string
		total                   int
	}{
		{"ordinary", `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"a\":1}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7},"extra":{"x":[1]}}`,
			true, `{"a":1}`, "stop", "", 7},
		{"null content and refusal", `{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":null,"refusal":"no"},"finish_reason":"stop"}]}`,
			true, "", "stop", "no", 0},
		{"length, no usage", `{"choices":[{"message":{"content":"{\"a\""},"finish_reason":"length"}]}`, true, `{"a"`, "length", "", 0},
		{"invalid UTF-8 replaced, as encoding/json does", "{\"choices\":[{\"message\":{\"content\":\"\xff\"},\"finish_reason\":\"stop\"}]}", true, "\ufffd", "stop", "", 0},
		{"no choices", `{"object":"chat.completion","choices":[]}`, false, "", "", "", 0},
		{"a stream chunk", `{"object":"chat.completion.chunk","choices":[{"delta":{"content":"x"}}]}`, false, "", "", "", 0},
		{"not JSON", `data: {"x":1}`, false, "", "", "", 0},
		{"error envelope", `{"error":{"message":"x"}}`, false, "", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := readCompletion([]byte(tt.body))
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if c.Output != tt.output || c.Finish != tt.finish || c.Refusal != tt.refusal || c.Resp.Usage.TotalTokens != tt.total {
				t.Errorf("got %q %q %q %d", c.Output, c.Finish, c.Refusal, c.Resp.Usage.TotalTokens)
			}
			if c.Resp.Choices[0].Message.Content != c.Output || string(c.Resp.Choices[0].FinishReason) != c.Finish {
				t.Error("go-openai view differs")
			}
		})
	}
}

// FuzzReadCompletion: the upstream reply reader never panics, and on valid
// UTF-8 it reads the same content encoding/json does.
func FuzzReadCompletion(f *testing.F) {
	f.Add([]byte(`{"id":"c","object":"chat.completion","choices":[{"message":{"content":"{}"},"finish_reason":"stop"}],"usage":{"total_tokens":1}}`))
	f.Add([]byte(`{"choices":[{"message":{"content":null,"refusal":"r"}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"a\u0000b"},"finish_reason":null}],"choices":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := readCompletion(b)
		if !ok || !utf8.Valid(b) {
			return
		}
		var ref struct {
			Choices []struct {
				Message struct {
					Content *string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(b, &ref) != nil || len(ref.Choices) == 0 {
			return // encoding/json is laxer or stricter on shapes we do not rely on
		}
		want := ""
		if p := ref.Choices[0].Message.Content; p != nil {
			want = *p
		}
		if c.Output != want {
			t.Fatalf("content %q, encoding/json reads %q", c.Output, want)
		}
	})
}
