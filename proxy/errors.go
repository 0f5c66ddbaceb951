package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
)

// ErrorType is an error envelope's "type".
type ErrorType string

// ErrorCode is an error envelope's "code" (also the audit's error_code).
type ErrorCode string

// The types of the error table.
const (
	typeInvalidRequest ErrorType = "invalid_request_error"
	typeAuth           ErrorType = "authentication_error"
	typeNeedsReview    ErrorType = "needs_review"
	typeUpstream       ErrorType = "upstream_error"
	typeRateLimit      ErrorType = "rate_limit_error"
	typeServer         ErrorType = "server_error"
)

// clientSystemHint ends a client_system_not_allowed message: what the
// route's config can say instead of reject (the route's client_system key,
// docs/config.md).
const clientSystemHint = "the route's config can set client_system: drop to drop them instead"

// StatusClientClosed is the status audited when the client left before
// its answer (nginx's 499; nobody reads the reply).
const StatusClientClosed = 499

// The codes of the error table.
const (
	CodeInvalidJSON          ErrorCode = "invalid_json"
	CodeInputSchemaViolation ErrorCode = "input_schema_violation"
	CodeClientSystem         ErrorCode = "client_system_not_allowed"
	CodeUnsupportedParameter ErrorCode = "unsupported_parameter"
	CodeInputTooLarge        ErrorCode = "input_too_large"
	CodeInvalidAPIKey        ErrorCode = "invalid_api_key"
	CodeModelNotFound        ErrorCode = "model_not_found"
	CodeRequestTooLarge      ErrorCode = "request_too_large"
	CodeContractViolation    ErrorCode = "contract_violation"
	CodeBudgetExhausted      ErrorCode = "budget_exhausted"
	CodeUpstreamError        ErrorCode = "upstream_error"
	CodeUpstreamTimeout      ErrorCode = "upstream_timeout"
	CodeRateLimitExceeded    ErrorCode = "rate_limit_exceeded"
	CodeMissingField         ErrorCode = "missing_field"
	CodeReviewNotFound       ErrorCode = "review_not_found"
	CodeResponseNotFound     ErrorCode = "response_not_found" // contractd keeps no response
	CodeReviewResolved       ErrorCode = "review_already_resolved"
	CodeInvalidParameter     ErrorCode = "invalid_parameter"
	CodeInvalidMessage       ErrorCode = "invalid_message"
	CodeRequestTimeout       ErrorCode = "request_timeout"
	CodeServerBusy           ErrorCode = "server_busy"
	CodeClientClosed         ErrorCode = "client_closed_request"
	CodeNotFound             ErrorCode = "not_found" // no such endpoint
	CodeContractNotFound     ErrorCode = "contract_not_found"
	CodeReviewStoreDown      ErrorCode = "review_store_unavailable"
	CodeInternal             ErrorCode = "internal_error"
)

// errorKind is the one status and type an error code is sent with.
type errorKind struct {
	Status int
	Type   ErrorType
}

// errorTable is every error the package answers, by code. writeError, the
// one gate to the envelope, sends nothing else (accepted), and
// docs/clients.md's error table is held to it (TestErrorCodesDocumented):
// a code added above and not here is answered 500 internal_error, which
// the first test of its path sees, instead of reaching clients with no
// documentation.
var errorTable = map[ErrorCode]errorKind{
	CodeInvalidJSON:          {http.StatusBadRequest, typeInvalidRequest},
	CodeInputSchemaViolation: {http.StatusBadRequest, typeInvalidRequest},
	CodeClientSystem:         {http.StatusBadRequest, typeInvalidRequest},
	CodeUnsupportedParameter: {http.StatusBadRequest, typeInvalidRequest},
	CodeInputTooLarge:        {http.StatusBadRequest, typeInvalidRequest},
	CodeInvalidMessage:       {http.StatusBadRequest, typeInvalidRequest},
	CodeInvalidParameter:     {http.StatusBadRequest, typeInvalidRequest},
	CodeMissingField:         {http.StatusBadRequest, typeInvalidRequest},
	CodeInvalidAPIKey:        {http.StatusUnauthorized, typeAuth},
	CodeModelNotFound:        {http.StatusNotFound, typeInvalidRequest},
	CodeReviewNotFound:       {http.StatusNotFound, typeInvalidRequest},
	CodeResponseNotFound:     {http.StatusNotFound, typeInvalidRequest},
	CodeContractNotFound:     {http.StatusNotFound, typeInvalidRequest},
	CodeNotFound:             {http.StatusNotFound, typeInvalidRequest},
	CodeRequestTimeout:       {http.StatusRequestTimeout, typeInvalidRequest},
	CodeReviewResolved:       {http.StatusConflict, typeInvalidRequest},
	CodeRequestTooLarge:      {http.StatusRequestEntityTooLarge, typeInvalidRequest},
	CodeContractViolation:    {http.StatusUnprocessableEntity, typeNeedsReview},
	CodeBudgetExhausted:      {http.StatusUnprocessableEntity, typeNeedsReview},
	CodeRateLimitExceeded:    {http.StatusTooManyRequests, typeRateLimit},
	CodeClientClosed:         {StatusClientClosed, typeInvalidRequest},
	CodeInternal:             {http.StatusInternalServerError, typeServer},
	CodeUpstreamError:        {http.StatusBadGateway, typeUpstream},
	CodeServerBusy:           {http.StatusServiceUnavailable, typeServer},
	CodeReviewStoreDown:      {http.StatusServiceUnavailable, typeServer},
	CodeUpstreamTimeout:      {http.StatusGatewayTimeout, typeUpstream},
}

// errUndeclared is what an error outside errorTable is answered with: a
// bug, so the 500 internal_error of one, the cause kept for the log.
var errUndeclared = errors.New("error code not in errorTable (proxy/errors.go)")

// accepted is e when errorTable holds its code with its status and type,
// else a 500 internal_error whose Internal names what was refused.
func accepted(e *APIError) *APIError {
	if k, ok := errorTable[e.Code]; ok && k.Status == e.Status && k.Type == e.Type {
		return e
	}
	ie := errInternal()
	ie.Internal = fmt.Errorf("%w: %d %s %s", errUndeclared, e.Status, e.Type, e.Code)
	return ie
}

// APIError is a client-facing error. Message is written for the client and
// must never contain secrets or internal details; Internal (logged only)
// may carry the cause.
type APIError struct {
	Status     int
	Type       ErrorType
	Code       ErrorCode
	Message    string
	Param      *string
	Review     *Review
	Violations []contracts.Violation // approve's verdict
	RetryAfter int                   // seconds: 429, 503 server_busy, 502 after upstream 429s
	// RetryAfterZero writes Retry-After: 0, an upstream 429's own "retry at
	// once" passed on with its 502; RetryAfter 0 writes none.
	RetryAfterZero bool
	Internal       error
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

// ReviewAttempt is one attempt as the client sees it; a stored review
// item's attempts carry the same fields.
type ReviewAttempt = review.AttemptReport

func badRequest(code ErrorCode, param, format string, args ...any) *APIError {
	e := &APIError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

// errClientClosed is the answer when the client left before it.
func errClientClosed() *APIError {
	return &APIError{Status: StatusClientClosed, Type: typeInvalidRequest, Code: CodeClientClosed, Message: "client closed the request"}
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message    string                `json:"message"`
	Type       ErrorType             `json:"type"`
	Code       ErrorCode             `json:"code"`
	Param      *string               `json:"param"`
	Review     *Review               `json:"review,omitempty"`
	Violations []contracts.Violation `json:"violations,omitempty"`
}

// writeError is the one gate from typed errors to the OpenAI envelope; it
// answers only what errorTable holds (accepted).
func writeError(w http.ResponseWriter, e *APIError) {
	e = accepted(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 || e.RetryAfterZero {
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

// body is the envelope's JSON, without HTML escaping: a message's "<key>"
// reads as <key> to a curl user, not \u003ckey\u003e (the SDKs decode
// either; the body is never HTML).
func (e *APIError) body() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorBody{Error: errorObject{Message: e.Message, Type: e.Type, Code: e.Code, Param: e.Param, Review: e.Review, Violations: e.Violations}})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// dedupeForm is what the review store keeps of a needs_review 422 for
// review.dedupe_window (review.Dedupe.Answer): its code and how many
// attempts it reports. The rest of the 422 is the item's: its id, route,
// contract name and the first Attempts of its stored attempts (a rerun
// appends after them), each attempt's report being the stored attempt
// without its output. renderDedupe makes the same bytes from them; the
// whole body (about 1.1 KB, mostly a copy of the attempts) was a third of
// every stored row when it was kept (before c9cbfa8).
type dedupeForm struct {
	Code     ErrorCode `json:"code"`
	Attempts *int      `json:"attempts"`
}

// dedupeAnswer is e's dedupe form (e a needs_review 422 from
// needsReviewError, with the stored item's attempts).
func (e *APIError) dedupeAnswer() json.RawMessage {
	n := len(e.Review.Attempts)
	b, _ := json.Marshal(dedupeForm{Code: e.Code, Attempts: &n})
	return b
}

// renderDedupe is the 422 a review store's dedupe record answers: rendered
// from the item (dedupeForm), or, for items stored by versions before
// c9cbfa8, the whole body they stored (parseNeedsReview). The review
// object says stored, as the body the client was first given did.
func renderDedupe(r *review.DedupeRecord) (*APIError, error) {
	var f struct {
		dedupeForm
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(r.Answer, &f); err != nil {
		return nil, err
	}
	if f.Error != nil {
		return parseNeedsReview(r.Answer)
	}
	if k, ok := errorTable[f.Code]; !ok || k.Type != typeNeedsReview || f.Attempts == nil || *f.Attempts < 0 {
		return nil, fmt.Errorf("not a needs_review answer")
	}
	var atts []ReviewAttempt // a stored attempt's report: the output's fields are skipped
	if err := json.Unmarshal(r.Attempts, &atts); err != nil {
		return nil, fmt.Errorf("attempts: %w", err)
	}
	n := *f.Attempts
	if len(atts) < n {
		return nil, fmt.Errorf("the answer reports %d attempts; the item holds %d", n, len(atts))
	}
	e := needsReviewError(r.ID, r.Route, r.Contract, f.Code, append(make([]ReviewAttempt, 0, n), atts[:n]...))
	e.Review.Stored, e.Review.URL = true, "/v1/reviews/"+r.ID
	return e, nil
}

// parseNeedsReview reads back a 422 body written by body (a review
// store's dedupe answer as versions before c9cbfa8 stored it).
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
