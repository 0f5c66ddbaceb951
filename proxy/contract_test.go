package proxy

// Contract-route answers: the success body (an ordinary chat completion,
// so OpenAI SDKs parse it unchanged), the
// 422 review, budgets, upstream violations, and streaming.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const classifyReq = `{"model":"classify","messages":[` + classifyMsg + `]}`

func TestSuccessBody(t *testing.T) {
	spaced := `{"intent": "claim" , "summary":"window broke",` + "\n" + ` "evidence": ["window broke"]}`
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if c.Temperature() > 0 {
			reply(w, 200, completion(invalidClassify, "stop", 10, 5))
			return
		}
		reply(w, 200, completion("\n  "+spaced+"\n\t", "stop", 8, 4))
	}, cfg{})
	r := h.post("", classifyReq)
	wantSuccess(t, r, "application/json", "classify", 2)

	var body struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage    map[string]int `json:"usage"`
		Contract struct {
			Route          string            `json:"route"`
			Contract       string            `json:"contract"`
			ContractSHA256 string            `json:"contract_sha256"`
			Attempts       int               `json:"attempts"`
			Evidence       []json.RawMessage `json:"evidence"`
		} `json:"contract"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Object != "chat.completion" || body.ID == "" || body.Created == 0 || len(body.Choices) != 1 {
		t.Errorf("envelope: %s", r.Body)
	}
	ch := body.Choices[0]
	if ch.Message.Role != "assistant" || ch.FinishReason != "stop" || ch.Index != 0 {
		t.Errorf("choice: %+v", ch)
	}
	if ch.Message.Content != spaced {
		t.Errorf("content %q, want exactly the extracted object's bytes %q", ch.Message.Content, spaced)
	}
	if body.Model != "test-model-1-2024-08-06" {
		t.Errorf("model %q, want what the upstream reported", body.Model)
	}
	if want := map[string]int{"prompt_tokens": 18, "completion_tokens": 9, "total_tokens": 27}; !reflect.DeepEqual(body.Usage, want) {
		t.Errorf("usage %v, want the sum over attempts %v", body.Usage, want)
	}
	k := h.rt.Contracts["classify_v1"]
	if c := body.Contract; c.Route != "classify" || c.Contract != "classify_v1" || c.ContractSHA256 != k.SHA256 || c.Attempts != 2 {
		t.Errorf("contract member %+v", c)
	}
	// "window broke" in "My window broke during the storm." (code points).
	sum := sha256.Sum256([]byte("window broke"))
	wantEv := fmt.Sprintf(`{"path":"/evidence/0","start":3,"end":15,"sha256":"%s"}`, hex.EncodeToString(sum[:]))
	if len(body.Contract.Evidence) != 1 || string(body.Contract.Evidence[0]) != wantEv {
		t.Errorf("evidence %s, want [%s]", body.Contract.Evidence, wantEv)
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(r.Body, &members)
	var cm map[string]json.RawMessage
	_ = json.Unmarshal(members["contract"], &cm)
	for _, key := range []string{"route", "contract", "contract_sha256", "attempts", "evidence"} {
		if _, ok := cm[key]; !ok {
			t.Errorf("contract.%s missing", key)
		}
	}
	ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
	if ev.Outcome != "valid" || ev.Status != 200 || len(ev.Attempts) != 2 || ev.Usage.TotalTokens != 27 {
		t.Errorf("audit %+v", ev)
	}
}

func TestEvidenceAlwaysAList(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	r := h.post("", `{"model":"free","messages":[`+userHi+`]}`)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"evidence":[]`) || !strings.Contains(string(r.Body), `"attempts":1`) {
		t.Errorf("status %d body %s", r.Status, r.Body)
	}
	wantContractHeaders(t, r, "free", 1)
}

func TestContractViolationReview(t *testing.T) {
	for _, tc := range []struct {
		route, body, output string
		rules               []string // rules of attempt 1's violations
	}{
		{"classify", classifyReq, invalidClassify, []string{"required", "additionalProperties"}},
		{"free", `{"model":"free","messages":[` + userHi + `]}`, invalidAnswer, []string{"prose_around_json"}},
		{"free", `{"model":"free","messages":[` + userHi + `]}`, `{"answer":"` + rejectedMarker + ` forbidden-word"}`, []string{"forbidden:secret"}},
		{"free", `{"model":"free","messages":[` + userHi + `]}`, "```json\n{\"answer\":\"" + rejectedMarker + "\"}\n```", []string{"markdown_fence"}},
		{"free", `{"model":"free","messages":[` + userHi + `]}`, `{"answer":["` + rejectedMarker + `"]}`, []string{"type"}},
	} {
		t.Run(tc.route+"/"+tc.rules[0], func(t *testing.T) {
			h := newHarness(t, always(tc.output), cfg{})
			r := h.post("", tc.body)
			wantError(t, r, 422, "needs_review", "contract_violation", nil)
			wantContractHeaders(t, r, tc.route, 2)
			if strings.Contains(string(r.Body), rejectedMarker) {
				t.Errorf("the 422 body carries the rejected output: %s", r.Body)
			}
			review, _ := r.errorObj()["review"].(map[string]any)
			if review == nil {
				t.Fatalf("no review inside error: %s", r.Body)
			}
			if review["id"] != r.Header.Get("X-Request-Id") || review["route"] != tc.route {
				t.Errorf("review id/route %v/%v, want %s/%s", review["id"], review["route"], r.Header.Get("X-Request-Id"), tc.route)
			}
			if review["contract"] != h.rt.Routes[tc.route].Contract.Name {
				t.Errorf("review contract %v", review["contract"])
			}
			atts, _ := review["attempts"].([]any)
			if len(atts) != 2 {
				t.Fatalf("review attempts %v", atts)
			}
			temps := []float64{h.rt.Routes[tc.route].Temperature, 0}
			for i, a := range atts {
				a := a.(map[string]any)
				for _, key := range []string{"attempt", "temperature", "shortened", "finish_reason", "usage", "violations"} {
					if _, ok := a[key]; !ok {
						t.Errorf("attempt %d lacks %s", i+1, key)
					}
				}
				if a["attempt"] != float64(i+1) || a["temperature"] != temps[i] || a["finish_reason"] != "stop" {
					t.Errorf("attempt %d: %v", i+1, a)
				}
				if u := a["usage"].(map[string]any); u["total_tokens"] != float64(15) {
					t.Errorf("attempt %d usage %v", i+1, u)
				}
				vs, _ := a["violations"].([]any)
				if len(vs) == 0 {
					t.Fatalf("attempt %d has no violations", i+1)
				}
				if i == 0 {
					var rules []string
					for _, v := range vs {
						v := v.(map[string]any)
						for _, key := range []string{"kind", "path", "rule", "message"} {
							if _, ok := v[key]; !ok {
								t.Errorf("violation lacks %s: %v", key, v)
							}
						}
						rules = append(rules, v["rule"].(string))
					}
					for _, want := range tc.rules {
						if !strings.Contains(strings.Join(rules, ","), want) {
							t.Errorf("violations %v lack %s", rules, want)
						}
					}
				}
			}
			ev := h.sink.waitEvent(t, review["id"].(string))
			if ev.Outcome != "needs_review" || ev.Status != 422 || len(ev.Attempts) != 2 || ev.ErrorCode != "contract_violation" {
				t.Errorf("audit %+v", ev)
			}
			if strings.Contains(h.sink.Raw(), rejectedMarker) {
				t.Error("audit carries output without include_content")
			}
		})
	}
}

// Label and enum violations must not quote the rejected value either: the
// review never carries the rejected output.
func TestReviewDoesNotQuoteLabels(t *testing.T) {
	h := newHarness(t, always(`{"intent":"`+rejectedMarker+`","summary":"s"}`), cfg{})
	r := h.post("", classifyReq)
	wantError(t, r, 422, "needs_review", "contract_violation", nil)
	if strings.Contains(string(r.Body), rejectedMarker) {
		t.Errorf("the review quotes the rejected output: %s", r.Body)
	}
}

func TestUpstreamViolationsAreRetried(t *testing.T) {
	refusal := func(w http.ResponseWriter) {
		reply(w, 200, mustJSON(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": nil, "refusal": "I can't help with that."}}},
			"usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}))
	}
	for _, tc := range []struct {
		name, rule, kind, finish string
		bad                      func(w http.ResponseWriter)
	}{
		{"length", "output_truncated", "upstream", "length", func(w http.ResponseWriter) {
			reply(w, 200, completion(`{"answer":"trunc`, "length", 1, 1))
		}},
		{"length with valid JSON", "output_truncated", "upstream", "length", func(w http.ResponseWriter) {
			reply(w, 200, completion(validAnswer, "length", 1, 1))
		}},
		{"refusal", "model_refusal", "upstream", "stop", refusal},
		{"content filter", "model_refusal", "upstream", "content_filter", func(w http.ResponseWriter) {
			reply(w, 200, completion("", "content_filter", 1, 1))
		}},
		{"empty", "empty_output", "parse", "stop", func(w http.ResponseWriter) {
			reply(w, 200, completion(" \n\t ", "stop", 1, 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Attempt 1 bad, attempt 2 valid: 200 after two attempts.
			h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
				if c.Temperature() > 0 {
					tc.bad(w)
					return
				}
				reply(w, 200, completion(validAnswer, "stop", 1, 1))
			}, cfg{})
			r := h.post("", `{"model":"free","messages":[`+userHi+`]}`)
			if r.Status != 200 || !strings.Contains(string(r.Body), `"attempts":2`) {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			// Always bad: 422 whose review names the violation.
			h2 := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) { tc.bad(w) }, cfg{})
			r = h2.post("", `{"model":"free","messages":[`+userHi+`]}`)
			wantError(t, r, 422, "needs_review", "contract_violation", nil)
			a := r.errorObj()["review"].(map[string]any)["attempts"].([]any)[0].(map[string]any)
			if a["finish_reason"] != tc.finish {
				t.Errorf("finish_reason %v, want %s", a["finish_reason"], tc.finish)
			}
			found := false
			for _, v := range a["violations"].([]any) {
				v := v.(map[string]any)
				if v["rule"] == tc.rule && v["kind"] == tc.kind {
					found = true
				}
			}
			if !found {
				t.Errorf("violations %v lack %s/%s", a["violations"], tc.kind, tc.rule)
			}
		})
	}
}

func TestBudgetExhausted(t *testing.T) {
	t.Run("after attempt 1", func(t *testing.T) {
		// Attempt 1 reports 560 tokens: 560 + input + 50 > 600 before attempt 2.
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 200, completion(invalidAnswer, "stop", 500, 60))
		}, cfg{})
		r := h.post("", `{"model":"tight","messages":[`+userHi+`]}`)
		wantError(t, r, 422, "needs_review", "budget_exhausted", nil)
		wantContractHeaders(t, r, "tight", 1)
		if h.up.Hits() != 1 {
			t.Errorf("upstream hits %d, want 1", h.up.Hits())
		}
		review := r.errorObj()["review"].(map[string]any)
		if review["id"] != r.Header.Get("X-Request-Id") || len(review["attempts"].([]any)) != 1 {
			t.Errorf("review %v", review)
		}
		if strings.Contains(string(r.Body), rejectedMarker) {
			t.Errorf("rejected output in the body: %s", r.Body)
		}
		ev := h.sink.waitEvent(t, review["id"].(string))
		if ev.Budget == nil || ev.Budget.MaxTotalTokens != 600 || ev.Budget.Used != 560 || ev.Outcome != "needs_review" {
			t.Errorf("audit %+v budget %+v", ev, ev.Budget)
		}
	})
	t.Run("before attempt 1", func(t *testing.T) {
		h := newHarness(t, always(validAnswer), cfg{})
		r := h.post("", `{"model":"broke","messages":[`+userHi+`]}`)
		wantError(t, r, 422, "needs_review", "budget_exhausted", nil)
		wantContractHeaders(t, r, "", 0) // no attempt ran
		if h.up.Hits() != 0 {
			t.Errorf("upstream hits %d", h.up.Hits())
		}
		review := r.errorObj()["review"].(map[string]any)
		if atts, ok := review["attempts"].([]any); !ok || len(atts) != 0 {
			t.Errorf("review attempts %v, want []", review["attempts"])
		}
	})
}

// sseChunks reads a contract stream into its chunks and checks the [DONE]
// terminator.
func sseChunks(t *testing.T, body string) []map[string]any {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(body))
	var out []map[string]any
	for {
		data, err := readEvent(br)
		if data == "[DONE]" {
			if rest, _ := readEvent(br); rest != "" {
				t.Errorf("data after [DONE]: %q", rest)
			}
			return out
		}
		if err != nil {
			t.Fatalf("stream ended without data: [DONE]: %q", body)
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk is not JSON: %q", data)
		}
		out = append(out, c)
	}
}

func TestContractStreaming(t *testing.T) {
	h := newHarness(t, byTemperature(invalidClassify, validClassify), cfg{})
	plain := h.post("", classifyReq)
	if plain.Status != 200 {
		t.Fatalf("status %d: %s", plain.Status, plain.Body)
	}
	want := plain.JSON["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)

	for _, includeUsage := range []bool{true, false} {
		t.Run(fmt.Sprint("include_usage=", includeUsage), func(t *testing.T) {
			before := h.up.Hits()
			body := fmt.Sprintf(`{"model":"classify","stream":true,"stream_options":{"include_usage":%v},"messages":[%s]}`, includeUsage, classifyMsg)
			r := h.post("", body)
			wantSuccess(t, r, "text/event-stream", "classify", 2)
			for _, c := range h.up.Calls()[before:] {
				wantMember(t, c.Body, "stream", "false")
				wantMember(t, c.Body, "stream_options", "")
			}
			chunks := sseChunks(t, string(r.Body))
			var content strings.Builder
			var finish []string
			var usage map[string]any
			for i, c := range chunks {
				if c["object"] != "chat.completion.chunk" || c["model"] != "test-model-1-2024-08-06" || c["id"] == "" {
					t.Errorf("chunk %d: %v", i, c)
				}
				if u, ok := c["usage"].(map[string]any); ok {
					usage = u
				}
				for _, ch := range c["choices"].([]any) {
					ch := ch.(map[string]any)
					d := ch["delta"].(map[string]any)
					if s, ok := d["content"].(string); ok {
						content.WriteString(s)
					}
					if f, ok := ch["finish_reason"].(string); ok {
						finish = append(finish, f)
					}
				}
			}
			if first := chunks[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any); first["role"] != "assistant" {
				t.Errorf("first delta %v, want the role", first)
			}
			if content.String() != want {
				t.Errorf("joined deltas %q, want the non-stream content %q", content.String(), want)
			}
			if !reflect.DeepEqual(finish, []string{"stop"}) {
				t.Errorf("finish reasons %v", finish)
			}
			switch {
			case includeUsage && usage == nil:
				t.Error("no usage chunk with include_usage")
			case includeUsage && usage["total_tokens"] != float64(27):
				t.Errorf("usage %v, want the sum over attempts", usage)
			case !includeUsage && usage != nil:
				t.Errorf("usage chunk without include_usage: %v", usage)
			}
		})
	}

	t.Run("invalid", func(t *testing.T) {
		h := newHarness(t, always(invalidClassify), cfg{})
		plain := h.post("", classifyReq)
		r := h.post("", `{"model":"classify","stream":true,"stream_options":{"include_usage":true},"messages":[`+classifyMsg+`]}`)
		wantError(t, r, 422, "needs_review", "contract_violation", nil)
		wantContractHeaders(t, r, "classify", 2)
		if strings.Contains(string(r.Body), "data:") || strings.Contains(string(r.Body), rejectedMarker) {
			t.Errorf("invalid stream sent events or output: %s", r.Body)
		}
		// The same 422 as without stream (but for the request id).
		a, b := plain.errorObj(), r.errorObj()
		a["message"], b["message"] = string(normIDs([]byte(a["message"].(string)))), string(normIDs([]byte(b["message"].(string))))
		delete(a["review"].(map[string]any), "id")
		delete(b["review"].(map[string]any), "id")
		delete(a["review"].(map[string]any), "url")
		delete(b["review"].(map[string]any), "url")
		if !reflect.DeepEqual(a, b) {
			t.Errorf("stream 422 differs:\n%v\n%v", a, b)
		}
	})
}
