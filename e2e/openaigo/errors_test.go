package openaigo_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestErrors: contractd's errors are the SDK's typed *openai.Error with
// the documented status, type, code and param (docs/clients.md, Error
// codes); a needs_review 422 is not retried by the SDK (x-should-retry:
// false), whatever its MaxRetries.
func TestErrors(t *testing.T) {
	t.Parallel()
	s := serve(t, "", "")
	var x exchanges
	client := s.client(x.middleware(), option.WithMaxRetries(3))

	before := len(s.up.Calls())
	_, err := client.Chat.Completions.New(ctx20(t), chatParams(badRoute))
	assertNeedsReview(t, err)
	if n := len(x.all()); n != 1 {
		t.Errorf("the SDK sent the needs_review request %d times, want once (x-should-retry: false)", n)
	}
	if n := len(s.up.Calls()) - before; n != 2 {
		t.Errorf("%d upstream calls, want the route's 2 attempts", n)
	}

	cases := []struct {
		name                      string
		call                      func(c openai.Client) error
		status                    int
		typ, code, param, rawParm string
	}{
		{"wrong key", func(c openai.Client) error {
			_, err := c.Chat.Completions.New(ctx20(t), chatParams(goodRoute), option.WithAPIKey("sk-wrong"))
			return err
		}, 401, "authentication_error", "invalid_api_key", "", "null"},
		{"unknown route", func(c openai.Client) error {
			_, err := c.Responses.New(ctx20(t), responseParams("no-such-route"))
			return err
		}, 404, "invalid_request_error", "model_not_found", "model", ""},
		{"tools", func(c openai.Client) error {
			p := chatParams(goodRoute)
			p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "f"})}
			_, err := c.Chat.Completions.New(ctx20(t), p)
			return err
		}, 400, "invalid_request_error", "unsupported_parameter", "tools", ""},
		{"input schema", func(c openai.Client) error {
			p := chatParams(goodRoute)
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`{"txt": "x"}`)}
			_, err := c.Chat.Completions.New(ctx20(t), p)
			return err
		}, 400, "invalid_request_error", "input_schema_violation", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(x.all())
			err := c.call(client)
			var e *openai.Error
			if !errors.As(err, &e) {
				t.Fatalf("%v (%T), want *openai.Error", err, err)
			}
			if e.StatusCode != c.status || e.Type != c.typ || e.Code != c.code {
				t.Errorf("%d %q %q, want %d %q %q", e.StatusCode, e.Type, e.Code, c.status, c.typ, c.code)
			}
			if c.param != "" && e.Param != c.param {
				t.Errorf("param %q, want %q", e.Param, c.param)
			}
			if e.JSON.Param.Raw() == "" {
				t.Errorf("error.param omitted (it is always present, null when none)")
			}
			if c.rawParm != "" && e.JSON.Param.Raw() != c.rawParm {
				t.Errorf("param %q, want %s", e.JSON.Param.Raw(), c.rawParm)
			}
			if m := missingRequired(*e); len(m) > 0 {
				t.Errorf("the error lacks %v: %s", m, e.RawJSON())
			}
			if got := len(x.all()) - n; got != 1 {
				t.Errorf("the SDK sent the request %d times, want once (a %d is not retried)", got, c.status)
			}
		})
	}
}

// TestRetry429: over the client's rate limit contractd answers 429
// rate_limit_exceeded with Retry-After; the SDK waits that long, retries
// (X-Stainless-Retry-Count: 1) and gets the 200. With no retries left the
// 429 is the typed error.
func TestRetry429(t *testing.T) {
	t.Parallel()
	s := serve(t, "  rate_limit: {requests_per_second: 1, burst: 1}\n", "")
	var x exchanges
	client := s.client(x.middleware(), option.WithMaxRetries(2))

	if _, err := client.Chat.Completions.New(ctx20(t), chatParams(goodRoute)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := client.Chat.Completions.New(ctx20(t), chatParams(goodRoute))
	if err != nil || c.Choices[0].Message.Content != goodContent {
		t.Fatalf("after a 429: %v", err)
	}
	ex := x.all()[1:]
	if len(ex) != 2 || ex[0].status != 429 || ex[1].status != 200 || ex[0].retryCount != "0" || ex[1].retryCount != "1" {
		t.Fatalf("exchanges %s, want a 429 then a 200 on the SDK's retry", describe(ex))
	}
	ra := ex[0].header.Get("Retry-After")
	if ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if waited := ex[1].at.Sub(ex[0].at); waited < 900*time.Millisecond {
		t.Errorf("the SDK retried after %v, before Retry-After's 1 s (started %v ago)", waited, time.Since(start))
	}

	noRetry := s.client()
	_, err = noRetry.Chat.Completions.New(ctx20(t), chatParams(goodRoute))
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "rate_limit_exceeded" || e.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("no retries left: %v, want the 429 rate_limit_exceeded with Retry-After", err)
	}
	if m := missingRequired(*e); len(m) > 0 {
		t.Errorf("the 429 lacks %v: %s", m, e.RawJSON())
	}
}

// TestRetry503: while max_inflight_bytes is held contractd answers 503
// server_busy with Retry-After: 1; the SDK retries after it and the retry,
// once the bytes are released, gets the 200.
func TestRetry503(t *testing.T) {
	t.Parallel()
	s := serve(t, "  max_body_bytes: 12288\n  max_inflight_bytes: 12288\n", `  - name: review-slow-busy
    upstream: fake
    model: fake-slow
    prompt: review
    contract: sentiment_v1
    temperature: 0.7
    max_output_tokens: 200
`)
	// The budget holds each body (and upstream reply) by its size: the
	// slow request's body (about 9,000 bytes) is held until its answer
	// (slowDelay), with room left for its reply; the SDK's request (about
	// 4,800 bytes) does not fit beside it.
	pad := strings.Repeat("x", 8700)
	body := fmt.Sprintf(`{"model": "review-slow-busy", "user": %q, "messages": [{"role": "user", "content": %q}]}`, pad, input(text))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequest("POST", s.base+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("slow request: %v", err)
			return
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("slow request: %d", res.StatusCode)
		}
	}()
	defer wg.Wait()
	// Wait until the slow request reached the upstream: its body is held.
	for deadline := time.Now().Add(5 * time.Second); len(s.up.Calls()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the upstream")
		}
	}

	var x exchanges
	p := chatParams(goodRoute)
	p.User = openai.String(strings.Repeat("y", 4500))
	retrying := s.client(x.middleware(), option.WithMaxRetries(2))
	c, err := retrying.Chat.Completions.New(ctx20(t), p)
	if err != nil || c.Choices[0].Message.Content != goodContent {
		t.Fatalf("after a 503: %v", err)
	}
	ex := x.all()
	if len(ex) < 2 || ex[0].status != 503 || ex[len(ex)-1].status != 200 {
		t.Fatalf("exchanges %s, want a 503 then the SDK's retry's 200", describe(ex))
	}
	if ra := ex[0].header.Get("Retry-After"); ra != "1" {
		t.Errorf("503 Retry-After %q, want 1", ra)
	}
	if waited := ex[1].at.Sub(ex[0].at); waited < 900*time.Millisecond {
		t.Errorf("the SDK retried after %v, before Retry-After's 1 s", waited)
	}
}

func describe(ex []exchange) string {
	var b strings.Builder
	for _, e := range ex {
		fmt.Fprintf(&b, "[%d retry-count %s Retry-After %q at %s] ", e.status, e.retryCount, e.header.Get("Retry-After"), e.at.Format("15:04:05.000"))
	}
	return b.String()
}
