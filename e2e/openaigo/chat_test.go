package openaigo_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

type sentiment struct {
	Sentiment string `json:"sentiment"`
	Summary   string `json:"summary"`
}

func chatParams(route string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       route,
		Temperature: openai.Float(1.3), // the route's replaces it
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(input(text))},
	}
}

func jsonSchemaFormat(schema map[string]any) openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "sentiment", Schema: schema, Strict: openai.Bool(true)}}}
}

// TestChatCompletions: the SDK's chat completion, plain, with a json_schema
// response_format and streamed, decodes contractd's answers into its types.
func TestChatCompletions(t *testing.T) {
	t.Parallel()
	s := serve(t, "", "  - name: raw\n    upstream: fake\n    model: fake-raw\n    passthrough: true\n")
	var x exchanges
	client := s.client(x.middleware(), option.WithHeader("Idempotency-Key", "idem-chat-1"))

	t.Run("plain", func(t *testing.T) {
		var res *http.Response
		c, err := client.Chat.Completions.New(ctx20(t), chatParams(goodRoute), option.WithResponseInto(&res))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content != goodContent || c.Choices[0].FinishReason != "stop" ||
			c.Choices[0].Message.Role != "assistant" {
			t.Fatalf("choices: %+v", c.Choices)
		}
		if c.Object != "chat.completion" || c.Model != "fake-good-2024-01-01" || c.Usage.TotalTokens != 60 || c.ID == "" {
			t.Errorf("object %q model %q usage %+v id %q", c.Object, c.Model, c.Usage, c.ID)
		}
		if m := missingRequired(c); len(m) > 0 {
			t.Errorf("the completion lacks members the SDK's ChatCompletion requires: %v\n%s", m, c.RawJSON())
		}
		// The contract member is an extra field the SDK keeps.
		var contract struct {
			Route    string `json:"route"`
			Attempts int    `json:"attempts"`
		}
		f, ok := c.JSON.ExtraFields["contract"]
		if !ok || json.Unmarshal([]byte(f.Raw()), &contract) != nil || contract.Route != goodRoute || contract.Attempts != 1 {
			t.Errorf("contract member %q (%v)", f.Raw(), ok)
		}
		if res.Header.Get("X-Contract-Route") != goodRoute || res.Header.Get("X-Contract-Attempts") != "1" ||
			!strings.HasPrefix(res.Header.Get("X-Request-Id"), "req_") {
			t.Errorf("headers: %v", res.Header)
		}
		// The SDK's own headers are accepted: its retry count, an idempotency key.
		ex := x.all()
		if last := ex[len(ex)-1]; last.status != 200 || last.retryCount != "0" || last.idem != "idem-chat-1" {
			t.Errorf("exchange: %+v", last)
		}
		calls := s.up.Calls()
		if h := calls[len(calls)-1].Header; h.Get("Idempotency-Key") != "" || h.Get("X-Stainless-Retry-Count") != "" {
			t.Errorf("the SDK's headers reached the upstream: %v", h)
		}
	})

	t.Run("json_schema", func(t *testing.T) {
		p := chatParams(goodRoute)
		p.ResponseFormat = jsonSchemaFormat(routeSchema())
		var res *http.Response
		c, err := client.Chat.Completions.New(ctx20(t), p, option.WithResponseInto(&res))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		var got sentiment
		if err := json.Unmarshal([]byte(c.Choices[0].Message.Content), &got); err != nil || got.Sentiment != "positive" {
			t.Fatalf("content %q: %v", c.Choices[0].Message.Content, err)
		}
		if h := res.Header.Get("X-Contract-Schema-Replaced"); h != "" {
			t.Errorf("X-Contract-Schema-Replaced %q for the route's own schema", h)
		}
		// A client schema that differs is replaced, and says so.
		other := routeSchema()
		other["required"] = []any{"sentiment"}
		p.ResponseFormat = jsonSchemaFormat(other)
		if _, err := client.Chat.Completions.New(ctx20(t), p, option.WithResponseInto(&res)); err != nil {
			t.Fatalf("New: %v", err)
		}
		if h := res.Header.Get("X-Contract-Schema-Replaced"); h != "true" {
			t.Errorf("X-Contract-Schema-Replaced %q for another schema, want true", h)
		}
		last := s.up.Calls()[len(s.up.Calls())-1]
		if strings.Contains(string(last.Body), `"required":["sentiment"]`) {
			t.Errorf("the client's schema reached the upstream: %s", last.Body)
		}
	})

	t.Run("stream", func(t *testing.T) {
		p := chatParams(goodRoute)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx20(t), p)
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			ch := stream.Current()
			chunks++
			if ch.Object != "chat.completion.chunk" {
				t.Errorf("chunk object %q", ch.Object)
			}
			if m := missingRequired(ch); len(m) > 0 {
				t.Errorf("chunk %d lacks members the SDK's ChatCompletionChunk requires: %v\n%s", chunks, m, ch.RawJSON())
			}
			if !acc.AddChunk(ch) {
				t.Fatalf("the accumulator refused chunk %d: %s", chunks, ch.RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != goodContent || acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("accumulated: %+v", acc.Choices)
		}
		if acc.Usage.TotalTokens != 60 || acc.Model != "fake-good-2024-01-01" {
			t.Errorf("accumulated usage %+v model %q", acc.Usage, acc.Model)
		}
		if chunks < 3 {
			t.Errorf("%d chunks, want role, content, finish and usage", chunks)
		}
	})

	// A passthrough route relays the upstream's stream; the SDK reads it
	// as from OpenAI.
	t.Run("passthrough stream", func(t *testing.T) {
		p := chatParams("raw")
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
		stream := client.Chat.Completions.NewStreaming(ctx20(t), p)
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("the accumulator refused %s", stream.Current().RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "raw text" || acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("accumulated %+v", acc.Choices)
		}
		last := s.up.Calls()[len(s.up.Calls())-1]
		if last.JSON["model"] != "fake-raw" || last.JSON["stream"] != true || last.Header.Get("Authorization") != "Bearer "+upstreamKey {
			t.Errorf("upstream got model %v stream %v auth %q", last.JSON["model"], last.JSON["stream"], last.Header.Get("Authorization"))
		}
	})

	t.Run("needs_review stream is the 422 error", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx20(t), chatParams(badRoute))
		defer stream.Close()
		for stream.Next() {
			t.Fatalf("a chunk on a needs_review route: %s", stream.Current().RawJSON())
		}
		assertNeedsReview(t, stream.Err())
	})
}

// assertNeedsReview checks err is the SDK's typed API error for a 422
// needs_review: status 422, type needs_review, code contract_violation,
// param null, the review member, a message naming the review, and
// x-should-retry: false.
func assertNeedsReview(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *openai.Error", err, err)
	}
	if e.StatusCode != 422 || e.Type != "needs_review" || e.Code != "contract_violation" {
		t.Errorf("status %d type %q code %q", e.StatusCode, e.Type, e.Code)
	}
	if e.JSON.Param.Raw() != "null" {
		t.Errorf("param %q (raw %q), want null", e.Param, e.JSON.Param.Raw())
	}
	var review struct {
		ID       string `json:"id"`
		Attempts []any  `json:"attempts"`
	}
	r, ok := e.JSON.ExtraFields["review"]
	if !ok || json.Unmarshal([]byte(r.Raw()), &review) != nil || !strings.HasPrefix(review.ID, "req_") || len(review.Attempts) == 0 {
		t.Fatalf("review member %q (%v)", r.Raw(), ok)
	}
	if !strings.HasPrefix(e.Message, "needs review "+review.ID+": ") {
		t.Errorf("message %q does not name the review %s", e.Message, review.ID)
	}
	if e.Response == nil || e.Response.Header.Get("X-Should-Retry") != "false" || e.Response.Header.Get("X-Request-Id") != review.ID {
		t.Errorf("422 headers: %v", e.Response.Header)
	}
	return e
}
