package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// sdkFixture is a contractd daemon in front of a fake upstream, and a
// go-openai client pointed at it with the client's key.
type sdkFixture struct {
	up     *fakeUpstream
	d      *daemon
	client *openai.Client
}

func newSDKFixture(t *testing.T) *sdkFixture {
	t.Helper()
	up := newUpstream(t, byModel)
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL(), routes: extraRoute("review-upstream-down", "fake-500")}))
	d := startDaemon(t, cfg, baseEnv())
	return &sdkFixture{up: up, d: d, client: sdkClient(d, clientKey)}
}

func sdkClient(d *daemon, key string) *openai.Client {
	c := openai.DefaultConfig(key)
	c.BaseURL = d.BaseURL()
	c.HTTPClient = &http.Client{Timeout: 20 * time.Second}
	return openai.NewClientWithConfig(c)
}

func reviewRequest(route, text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:       route,
		Temperature: 1.3, // replaced by the route's
		MaxTokens:   5,   // replaced by the route's
		Messages:    []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: reviewInput(text)}},
	}
}

func ctx20(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestGoOpenAI(t *testing.T) {
	t.Parallel()
	f := newSDKFixture(t)
	const text = "The delivery was fast and the food was great."

	var normal string
	t.Run("chat completion", func(t *testing.T) {
		resp, err := f.client.CreateChatCompletion(ctx20(t), reviewRequest("review-sentiment", text))
		if err != nil {
			t.Fatalf("CreateChatCompletion: %v", err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("choices: %d", len(resp.Choices))
		}
		c := resp.Choices[0]
		normal = c.Message.Content
		if normal != goodContent {
			t.Errorf("content %q, want the upstream's accepted JSON %q", normal, goodContent)
		}
		if c.FinishReason != openai.FinishReasonStop || c.Message.Role != openai.ChatMessageRoleAssistant {
			t.Errorf("finish_reason %q role %q", c.FinishReason, c.Message.Role)
		}
		if resp.Object != "chat.completion" || resp.Model != "fake-good-2024-01-01" {
			t.Errorf("object %q model %q (want the upstream's reported model)", resp.Object, resp.Model)
		}
		if resp.Usage.TotalTokens != 60 {
			t.Errorf("usage %+v, want the upstream's (one attempt)", resp.Usage)
		}
		h := resp.Header()
		if h.Get("X-Contract-Route") != "review-sentiment" || h.Get("X-Contract-Attempts") != "1" || h.Get("X-Request-Id") == "" {
			t.Errorf("headers: route %q attempts %q request id %q", h.Get("X-Contract-Route"), h.Get("X-Contract-Attempts"), h.Get("X-Request-Id"))
		}
		// What the upstream got: the route's parameters and the rendered prompt.
		reqs := f.up.Requests()
		last := reqs[len(reqs)-1]
		if last.Path != "/v1/chat/completions" {
			t.Errorf("upstream path %q", last.Path)
		}
		if last.Body["model"] != "fake-good" || last.Body["temperature"] != 0.7 || last.Body["max_tokens"] != 200.0 {
			t.Errorf("upstream body: model %v temperature %v max_tokens %v", last.Body["model"], last.Body["temperature"], last.Body["max_tokens"])
		}
		msgs, _ := last.Body["messages"].([]any)
		if len(msgs) != 2 {
			t.Fatalf("upstream messages: %s", last.Raw)
		}
		sys, _ := msgs[0].(map[string]any)
		usr, _ := msgs[1].(map[string]any)
		if sys["role"] != "system" || !strings.Contains(sys["content"].(string), "positive, negative, neutral") {
			t.Errorf("system message: %v", sys)
		}
		if usr["role"] != "user" || usr["content"] != "Review: "+text+"\n" {
			t.Errorf("user message: %v", usr)
		}
	})

	t.Run("stream joins to the normal content", func(t *testing.T) {
		req := reviewRequest("review-sentiment", text)
		req.Stream = true
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
		stream, err := f.client.CreateChatCompletionStream(ctx20(t), req)
		if err != nil {
			t.Fatalf("CreateChatCompletionStream: %v", err)
		}
		defer stream.Close()
		if h := stream.Header(); h.Get("X-Contract-Route") != "review-sentiment" || h.Get("X-Contract-Attempts") != "1" ||
			!strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Errorf("stream headers: %v", h)
		}
		var joined strings.Builder
		var finish openai.FinishReason
		var usage *openai.Usage
		chunks := 0
		for {
			ch, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			chunks++
			if ch.Object != "chat.completion.chunk" {
				t.Errorf("chunk object %q", ch.Object)
			}
			for _, c := range ch.Choices {
				joined.WriteString(c.Delta.Content)
				if c.FinishReason != "" {
					finish = c.FinishReason
				}
			}
			if ch.Usage != nil {
				usage = ch.Usage
			}
		}
		if joined.String() != goodContent || (normal != "" && joined.String() != normal) {
			t.Errorf("joined deltas %q, want the normal content %q", joined.String(), normal)
		}
		if finish != openai.FinishReasonStop {
			t.Errorf("finish_reason %q", finish)
		}
		if usage == nil || usage.TotalTokens != 60 {
			t.Errorf("usage chunk: %+v", usage)
		}
		if chunks < 3 {
			t.Errorf("%d chunks", chunks)
		}
		// The upstream is never asked to stream on a contract route.
		reqs := f.up.Requests()
		last := reqs[len(reqs)-1]
		if last.Body["stream"] != false {
			t.Errorf("upstream stream = %v, want false", last.Body["stream"])
		}
		if _, ok := last.Body["stream_options"]; ok {
			t.Errorf("stream_options reached the upstream: %s", last.Raw)
		}
	})

	t.Run("needs_review is an APIError 422", func(t *testing.T) {
		before := len(f.up.Requests())
		_, err := f.client.CreateChatCompletion(ctx20(t), reviewRequest("review-always-bad", text))
		wantAPIError(t, err, 422, "needs_review", "contract_violation")
		// Both default attempts ran: the configured temperature, then 0.
		reqs := f.up.Requests()[before:]
		if len(reqs) != 2 {
			t.Fatalf("upstream saw %d attempts, want 2", len(reqs))
		}
		if reqs[0].Body["temperature"] != 0.7 || reqs[1].Body["temperature"] != 0.0 || !strings.Contains(string(reqs[1].Raw), `"temperature":0`) {
			t.Errorf("attempt temperatures %v, %v (%s)", reqs[0].Body["temperature"], reqs[1].Body["temperature"], reqs[1].Raw)
		}
	})

	t.Run("needs_review on a stream is an APIError 422 too", func(t *testing.T) {
		req := reviewRequest("review-always-bad", text)
		req.Stream = true
		stream, err := f.client.CreateChatCompletionStream(ctx20(t), req)
		if err == nil {
			stream.Close()
		}
		wantAPIError(t, err, 422, "needs_review", "contract_violation")
	})

	t.Run("422 body carries the review", func(t *testing.T) {
		resp, body := post(t, f.d, reviewBody("review-always-bad", text))
		if resp.StatusCode != 422 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		var e struct {
			Error struct {
				Type   string  `json:"type"`
				Code   string  `json:"code"`
				Param  *string `json:"param"`
				Review struct {
					ID       string `json:"id"`
					Route    string `json:"route"`
					Contract string `json:"contract"`
					Attempts []struct {
						Attempt     int     `json:"attempt"`
						Temperature float64 `json:"temperature"`
						Violations  []struct {
							Kind, Path, Rule string
						} `json:"violations"`
					} `json:"attempts"`
				} `json:"review"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("422 body: %v: %s", err, body)
		}
		rv := e.Error.Review
		if rv.ID != resp.Header.Get("X-Request-Id") || rv.Route != "review-always-bad" || rv.Contract != "sentiment_v1" || len(rv.Attempts) != 2 {
			t.Errorf("review: %+v (request id %q)", rv, resp.Header.Get("X-Request-Id"))
		}
		for _, a := range rv.Attempts {
			if len(a.Violations) == 0 || a.Violations[0].Kind != "parse" {
				t.Errorf("attempt %d violations: %+v", a.Attempt, a.Violations)
			}
		}
		if resp.Header.Get("X-Contract-Attempts") != "2" {
			t.Errorf("X-Contract-Attempts %q", resp.Header.Get("X-Contract-Attempts"))
		}
		// The rejected output never reaches the client.
		if strings.Contains(string(body), "Sure! The sentiment") {
			t.Errorf("422 body carries the rejected output: %s", body)
		}
	})

	t.Run("wrong client key is an APIError 401", func(t *testing.T) {
		before := len(f.up.Requests())
		_, err := sdkClient(f.d, "sk-test-wrong").CreateChatCompletion(ctx20(t), reviewRequest("review-sentiment", text))
		wantAPIError(t, err, 401, "", "invalid_api_key")
		if n := len(f.up.Requests()); n != before {
			t.Errorf("an unauthenticated request reached the upstream")
		}
	})

	t.Run("upstream failure is an APIError 502", func(t *testing.T) {
		before := len(f.up.Requests())
		_, err := f.client.CreateChatCompletion(ctx20(t), reviewRequest("review-upstream-down", text))
		apiErr := wantAPIError(t, err, 502, "upstream_error", "upstream_error")
		// max_retries 0, and an upstream failure is not a contract
		// violation: no second attempt.
		if n := len(f.up.Requests()) - before; n != 1 {
			t.Errorf("the upstream saw %d calls, want 1", n)
		}
		if strings.Contains(apiErr.Message, upstreamKey) {
			t.Errorf("the error message carries the upstream key")
		}
	})

	t.Run("unknown route is an APIError 404", func(t *testing.T) {
		_, err := f.client.CreateChatCompletion(ctx20(t), reviewRequest("no-such-route", text))
		wantAPIError(t, err, 404, "", "model_not_found")
	})

	t.Run("models lists the routes", func(t *testing.T) {
		list, err := f.client.ListModels(ctx20(t))
		if err != nil {
			t.Fatalf("ListModels: %v", err)
		}
		var ids []string
		for _, m := range list.Models {
			ids = append(ids, m.ID)
		}
		for _, want := range []string{"review-sentiment", "review-always-bad", "review-slow"} {
			if !contains(ids, want) {
				t.Errorf("models %v lack %q", ids, want)
			}
		}
	})

	t.Run("keys", func(t *testing.T) {
		f.up.assertKeys(t)
		f.d.assertNoSecrets()
	})
}

// wantAPIError checks that err is an *openai.APIError with this status,
// type (unless typ is "") and code, and returns it.
func wantAPIError(t *testing.T, err error, status int, typ, code string) *openai.APIError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want an *openai.APIError")
	}
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %T %v, want an *openai.APIError", err, err)
	}
	if apiErr.HTTPStatusCode != status || (typ != "" && apiErr.Type != typ) || apiErr.Code != code {
		t.Errorf("APIError status %d type %q code %v, want %d %q %s", apiErr.HTTPStatusCode, apiErr.Type, apiErr.Code, status, typ, code)
	}
	return apiErr
}
