package testkit

import (
	"encoding/json"
	"net/http"
)

// Completion describes a non-streamed OpenAI chat completion an upstream
// sends back; JSON renders it.
type Completion struct {
	ID          string
	Model       string
	Fingerprint string // system_fingerprint; omitted when empty
	Content     string // choices[0].message.content
	Finish      string // finish_reason; "stop" when empty
	Logprobs    bool   // include "logprobs": null in the choice

	PromptTokens, CompletionTokens int // usage; total is their sum
}

// WireMessage is a chat completion's choices[].message as a client
// decodes it: Content and Refusal stay nil when null or absent.
type WireMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
}

// JSON is the completion's body (keys in sorted order, as encoding/json
// writes a map).
func (c Completion) JSON() []byte {
	finish := c.Finish
	if finish == "" {
		finish = "stop"
	}
	choice := map[string]any{"index": 0, "finish_reason": finish,
		"message": map[string]any{"role": "assistant", "content": c.Content}}
	if c.Logprobs {
		choice["logprobs"] = nil
	}
	body := map[string]any{
		"id": c.ID, "object": "chat.completion", "created": 1700000000, "model": c.Model,
		"choices": []any{choice},
		"usage": map[string]any{"prompt_tokens": c.PromptTokens, "completion_tokens": c.CompletionTokens,
			"total_tokens": c.PromptTokens + c.CompletionTokens},
	}
	if c.Fingerprint != "" {
		body["system_fingerprint"] = c.Fingerprint
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return b
}

// Reply writes a JSON response with status and body.
func Reply(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
