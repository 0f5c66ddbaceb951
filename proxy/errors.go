package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
)

// Error codes and types of the error table.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuth           = "authentication_error"
	typeNeedsReview    = "needs_review"
	typeUpstream       = "upstream_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"

	CodeInvalidJSON          = "invalid_json"
	CodeInputSchemaViolation = "input_schema_violation"
	CodeClientSystem         = "client_system_not_allowed"
	CodeUnsupportedParameter = "unsupported_parameter"
	CodeInputTooLarge        = "input_too_large"
	CodeInvalidAPIKey        = "invalid_api_key"
	CodeModelNotFound        = "model_not_found"
	CodeRequestTooLarge      = "request_too_large"
	CodeContractViolation    = "contract_violation"
	CodeBudgetExhausted      = "budget_exhausted"
	CodeUpstreamError        = "upstream_error"
	CodeUpstreamTimeout      = "upstream_timeout"
	CodeRateLimitExceeded    = "rate_limit_exceeded"
	CodeMissingField         = "missing_field"
	CodeReviewNotFound       = "review_not_found"
	CodeReviewResolved       = "review_already_resolved"
	CodeInvalidParameter     = "invalid_parameter"
	CodeInvalidMessage       = "invalid_message"
	CodeRequestTimeout       = "request_timeout"
	CodeServerBusy           = "server_busy"
	CodeClientClosed         = "client_closed_request"
	CodeNotFound             = "not_found" // no such endpoint
	CodeContractNotFound     = "contract_not_found"
	CodeReviewStoreDown      = "review_store_unavailable"
	CodeInternal             = "internal_error"
)

// APIError is a client-facing error. Message is written for the client and
// must never contain secrets or internal details; Internal (logged only)
// may carry the cause.
type APIError struct {
	Status     int
	Type       string
	Code       string
	Message    string
	Param      *string
	Review     *Review
	Violations []contracts.Violation // approve's verdict
	RetryAfter int                   // seconds: 429, 503 server_busy, 502 after upstream 429s
	Internal   error
}

func (e *APIError) Error() string {
	if e.Internal != nil {
		return fmt.Sprintf("%s (%d %s): %v", e.Code, e.Status, e.Message, e.Internal)
	}
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

func (e *APIError) Unwrap() error { return e.Internal }

// Review is the 422 body's account of every attempt. It never
// holds the rejected outputs.
type Review struct {
	ID       string          `json:"id"`
	Route    string          `json:"route"`
	Contract string          `json:"contract"`
	Attempts []ReviewAttempt `json:"attempts"`
	Stored   bool            `json:"stored"`
	URL      string          `json:"url"`
}

// ReviewAttempt is one attempt as the client sees it.
type ReviewAttempt struct {
	Attempt      int                   `json:"attempt"`
	Temperature  float64               `json:"temperature"`
	Shortened    bool                  `json:"shortened"`
	FinishReason string                `json:"finish_reason"`
	Usage        audit.Usage           `json:"usage"`
	Violations   []contracts.Violation `json:"violations"`
}

func badRequest(code, param, format string, args ...any) *APIError {
	e := &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message    string                `json:"message"`
	Type       string                `json:"type"`
	Code       string                `json:"code"`
	Param      *string               `json:"param"`
	Review     *Review               `json:"review,omitempty"`
	Violations []contracts.Violation `json:"violations,omitempty"`
}

// writeError is the one gate from typed errors to the OpenAI envelope.
func writeError(w http.ResponseWriter, e *APIError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if e.Status == http.StatusUnprocessableEntity && e.Type == typeNeedsReview {
		// Honoured by the official SDKs' retry logic: repeating the same
		// request cannot change a verdict already stored for review.
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(e.body(), '\n'))
}

// body is the envelope's JSON.
func (e *APIError) body() []byte {
	b, _ := json.Marshal(errorBody{Error: errorObject{Message: e.Message, Type: e.Type, Code: e.Code, Param: e.Param, Review: e.Review, Violations: e.Violations}})
	return b
}

// parseNeedsReview reads back a 422 body written by body (a review
// store's dedupe answer).
func parseNeedsReview(b []byte) (*APIError, error) {
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		return nil, err
	}
	o := eb.Error
	if o.Type != typeNeedsReview || o.Review == nil {
		return nil, fmt.Errorf("not a needs_review body")
	}
	return &APIError{Status: http.StatusUnprocessableEntity, Type: o.Type, Code: o.Code, Message: o.Message, Param: o.Param, Review: o.Review}, nil
}
