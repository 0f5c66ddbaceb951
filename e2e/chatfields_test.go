package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestChatFieldsOnContractRoutes checks what docs/clients.md's "Chat
// completions on contract routes" says: the route's fields replace the
// client's, the others reach the upstream byte for byte, and the answer
// carries the passing attempt's id, model and system_fingerprint but never
// logprobs, even when the client asked and the upstream sent them (they
// describe the model's text, not the accepted JSON).
func TestChatFieldsOnContractRoutes(t *testing.T) {
	t.Parallel()
	withLogprobs := `{"id":"chatcmpl-lp","object":"chat.completion","created":1,"model":"fake-good-2024-01-01","system_fingerprint":"fp_lp",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + jsonString(goodContent) + `,"refusal":null},` +
		`"logprobs":{"content":[{"token":"{","logprob":-0.01,"bytes":[123],"top_logprobs":[{"token":"{","logprob":-0.01,"bytes":[123]}]}],"refusal":null},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}}`
	up := newUpstream(t, func(upstreamRequest, int) reply { return reply{Raw: []byte(withLogprobs)} })
	d := startDaemon(t, writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()})), baseEnv())

	body := `{"model": "review-sentiment", "messages": [{"role": "user", "content": ` + jsonString(reviewInput("Great food.")) + `}],
		"temperature": 1.9, "max_completion_tokens": 5, "seed": 3, "n": 1, "response_format": {"type": "json_object"},
		"logprobs": true, "top_logprobs": 2, "stop": ["\n\n\n"], "top_p": 0.5, "user": "u-1", "x_vendor": {"a": [1, 2]}}`
	resp, got := post(t, d, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	var ans struct {
		ID, Model         string
		SystemFingerprint string `json:"system_fingerprint"`
		Choices           []struct {
			Logprobs     json.RawMessage
			FinishReason string `json:"finish_reason"`
			Message      struct{ Content string }
		}
	}
	if err := json.Unmarshal(got, &ans); err != nil || len(ans.Choices) != 1 {
		t.Fatalf("answer: %v: %s", err, got)
	}
	c := ans.Choices[0]
	if string(c.Logprobs) != "null" || c.Message.Content != goodContent || c.FinishReason != "stop" {
		t.Errorf("choice: logprobs %s, content %q, finish_reason %q; want null logprobs and the accepted JSON", c.Logprobs, c.Message.Content, c.FinishReason)
	}
	if ans.ID != "chatcmpl-lp" || ans.Model != "fake-good-2024-01-01" || ans.SystemFingerprint != "fp_lp" {
		t.Errorf("id %q model %q system_fingerprint %q, want the passing attempt's", ans.ID, ans.Model, ans.SystemFingerprint)
	}

	reqs := up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream calls: %d, want 1", len(reqs))
	}
	raw := string(reqs[0].Raw)
	for _, kept := range []string{`"logprobs":true`, `"top_logprobs":2`, `"stop":["\n\n\n"]`, `"top_p":0.5`, `"user":"u-1"`, `"x_vendor":{"a": [1, 2]}`} {
		if !strings.Contains(raw, kept) {
			t.Errorf("the upstream body lacks the client's %s (the value byte for byte): %s", kept, raw)
		}
	}
	ub := reqs[0].Body
	if ub["temperature"] != 0.7 || ub["max_tokens"] != 200.0 || ub["stream"] != false {
		t.Errorf("temperature %v max_tokens %v stream %v, want the route's 0.7, 200, false: %s", ub["temperature"], ub["max_tokens"], ub["stream"], raw)
	}
	for _, gone := range []string{"max_completion_tokens", "seed", "n", "response_format"} {
		if _, ok := ub[gone]; ok {
			t.Errorf("the client's %s reached the upstream: %s", gone, raw)
		}
	}
}
