// Package goclient is go-openai against contractd, as docs/clients.md
// quotes it: a typed chat completion, and the review behind a 422.
// go-openai keeps only the error envelope's message, type, code and param
// (not error.review), so the review id is read from the message, whose form
// contractd keeps: "needs review <id>: <n> attempts failed (...); GET
// /v1/reviews/<id>". go-openai has no call for /v1/reviews, so the wait
// for a reviewer's decision is a plain GET.
package goclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"

	openai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"
)

type Sentiment struct {
	Sentiment string `json:"sentiment" enum:"positive,negative,neutral"`
	Summary   string `json:"summary"`
}

// NewClient: baseURL is contractd's http://HOST:PORT/v1, key a client key.
func NewClient(baseURL, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = baseURL
	return openai.NewClientWithConfig(cfg) // go-openai does not retry
}

// Classify sends text to the route; the route's contract decides the shape,
// the JSON Schema built from Sentiment only decodes the answer.
func Classify(ctx context.Context, c *openai.Client, route, text string) (Sentiment, error) {
	var out Sentiment
	schema, err := jsonschema.GenerateSchemaForType(out)
	if err != nil {
		return out, err
	}
	in, _ := json.Marshal(map[string]string{"text": text})
	resp, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:    route, // the route name
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: string(in)}},
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "sentiment", Schema: schema, Strict: true}},
	})
	if err != nil {
		return out, err
	}
	return out, schema.Unmarshal(resp.Choices[0].Message.Content, &out)
}

var needsReview = regexp.MustCompile(`^needs review (\S+): `)

// ReviewOf: a needs_review is an *openai.APIError with HTTPStatusCode 422,
// Code "contract_violation" or "budget_exhausted".
func ReviewOf(err error) (code, reviewID string, ok bool) {
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusUnprocessableEntity {
		return "", "", false
	}
	m := needsReview.FindStringSubmatch(apiErr.Message)
	if m == nil {
		return "", "", false
	}
	code, _ = apiErr.Code.(string)
	return code, m[1], true
}

type Review struct {
	ID         string `json:"id"`
	Status     string `json:"status"` // pending, approved or rejected
	Resolution *struct {
		Output json.RawMessage `json:"output"` // the approved output
	} `json:"resolution"`
}

// WaitReview asks GET /v1/reviews/{id}?wait= (at most 60s) with the key
// that made the request.
func WaitReview(ctx context.Context, baseURL, key, id, wait string) (Review, error) {
	var r Review
	u := baseURL + "/reviews/" + url.PathEscape(id) + "?wait=" + url.QueryEscape(wait)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return r, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("GET /v1/reviews/%s: %s", id, resp.Status)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}
