package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
	openai "github.com/sashabaranov/go-openai"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func sha(b []byte) string {
	s := sha256.Sum256(b)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], s[:])
	return string(h[:])
}

// shaString is sha of a string's bytes without copying them first (a
// []byte conversion of a model output allocates its size).
func shaString(s string) string { return sha(stringBytes(s)) }

// stringBytes is s's own bytes, for a hash that only reads them: no copy,
// as a []byte conversion would make.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// verdict is the outcome of the attempt loop.
type verdict struct {
	comp     *Completion // the accepted attempt's completion
	result   contracts.Result
	usage    audit.Usage
	attempts []ReviewAttempt
	outputs  []string // each attempt's output text, for the review item
	// The first attempt's records, in the verdict's own allocation (most
	// requests make one attempt): attempts, outputs and the audit event's
	// attempts start in them.
	firstAttempt [1]ReviewAttempt
	firstOutput  [1]string
	firstAudit   [1]audit.Attempt
}

// contract runs a contract route: prepare, attempt in order, answer. msgs
// are the client messages when an edge's adapter already read them (nil:
// read obj's "messages").
func (s *Server) contract(ctx context.Context, w http.ResponseWriter, r *http.Request, x *exchange, route *config.Route, obj object, msgs []clientMessage) {
	k := route.Contract
	x.ev.Prompt = &audit.Ref{Name: route.Prompt.Name, SHA256: route.Prompt.SHA256}
	x.ev.Contract = &audit.Ref{Name: k.Name, SHA256: k.SHA256}
	if route.Budget.MaxTotalTokens > 0 {
		x.ev.Budget = &audit.Budget{MaxTotalTokens: route.Budget.MaxTotalTokens}
	}
	x.noteSchemaReplaced(w.Header(), route, obj)
	p, aerr := prepare(route, obj, msgs)
	if aerr != nil {
		if x.edge == responsesEdge {
			responsesParam(aerr)
		}
		x.fail(ctx, w, aerr, audit.OutcomeRejected)
		return
	}
	// The input's hash and copy are for the audit line only (the review
	// item reads the input's bytes itself; the dedupe key and the log line
	// read neither): none when the sink drops every event (sink none).
	if !audit.Discards(s.Audit) {
		in := p.inputJSON()
		x.ev.InputSHA256 = sha(in)
		if x.st.rt.Audit.IncludeContent {
			x.ev.Input = json.RawMessage(bytes.Clone(in)) // may alias the pooled body
			if !json.Valid(in) {
				x.ev.Input = mustJSON(string(in))
			}
		}
	}
	window := x.st.rt.Review.DedupeWindow
	var keep func(*APIError, time.Duration)
	var dkey dedupeKey
	if window > 0 {
		dkey = newDedupeKey(x.keySum, x.edge.api, route.Name, x.body, route.Prompt.SHA256, k.SHA256)
		hit, release, err := s.dedupe.acquire(ctx, dkey)
		switch {
		case err != nil:
			x.fail(ctx, w, waitError(r), audit.OutcomeRejected)
			return
		case hit != nil:
			x.deduplicated(ctx, w, hit)
			return
		}
		keep = release
		defer release(nil, 0) // nothing to keep unless kept below (release runs once)
	}
	v, aerr := s.attempts(ctx, r, x, p)
	h := w.Header()
	if len(x.ev.Attempts) > 0 {
		h.Set("X-Contract-Route", route.Name)
		h.Set("X-Contract-Attempts", strconv.Itoa(len(x.ev.Attempts)))
	}
	if aerr != nil {
		outcome := audit.OutcomeNeedsReview
		switch {
		case aerr.Status == http.StatusBadRequest:
			outcome = audit.OutcomeRejected
		case aerr.Code == CodeServerBusy:
			// No room to hold the upstream's reply: contractd refused the
			// request, as it refuses a body it has no room for; the
			// upstream did not fail.
			outcome = audit.OutcomeRejected
		case aerr.Status >= 500:
			outcome = audit.OutcomeUpstreamError
		case r.Context().Err() != nil:
			outcome = audit.OutcomeRejected
		}
		if rv := aerr.Review; rv != nil && outcome == audit.OutcomeNeedsReview {
			rv.URL = "/v1/reviews/" + rv.ID
			if q := s.Reviews; q != nil {
				it := x.reviewItem(p, v, rv, x.body)
				if keep != nil {
					// The answer as the client gets it once the item is
					// durable (stored, or spooled and moved in later).
					rv.Stored = true
					it.Dedupe = &review.Dedupe{Key: dkey.String(), Until: s.dedupe.now().Add(window), Answer: aerr.dedupeAnswer()}
				}
				rv.Stored = q.save(ctx, it)
			}
			if keep != nil {
				keep(aerr, window)
			}
		}
		x.fail(ctx, w, aerr, outcome)
		return
	}
	x.finish(ctx, http.StatusOK, audit.OutcomeValid, "")
	x.edge.write(w, v, route, x.ev.RequestID, p)
	v.comp.release() // the answer is written: its literal is read no more
}

// deduplicated answers with the stored 422 of an identical request: same
// review, no upstream call.
func (x *exchange) deduplicated(ctx context.Context, w http.ResponseWriter, hit *APIError) {
	h := w.Header()
	h.Set("X-Contract-Route", hit.Review.Route)
	if n := len(hit.Review.Attempts); n > 0 {
		h.Set("X-Contract-Attempts", strconv.Itoa(n))
	}
	h.Set("X-Contract-Deduplicated", "true")
	x.ev.Deduplicated, x.ev.ReviewID = true, hit.Review.ID
	x.fail(ctx, w, hit, audit.OutcomeNeedsReview)
}

// waitError is the answer when the request ends while an identical one
// runs: the client left, or request_timeout passed. Either way it is
// audited rejected with no attempt: this request called no upstream (as
// one whose body waited out request_timeout for room in
// max_inflight_bytes), and upstream_error would count an upstream failure
// that did not happen.
func waitError(r *http.Request) *APIError {
	if r.Context().Err() != nil {
		return errClientClosed()
	}
	return &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout,
		Message: "request_timeout passed while an identical request was running"}
}

// attempts runs the retry plan. It returns the accepted verdict,
// or the client error: 400 input_too_large, 422 with the review, 502/504.
func (s *Server) attempts(ctx context.Context, r *http.Request, x *exchange, p *Prepared) (*verdict, *APIError) {
	route := p.Route
	v := &verdict{}
	v.attempts, v.outputs = v.firstAttempt[:0], v.firstOutput[:0]
	if x.ev.Attempts == nil {
		x.ev.Attempts = v.firstAudit[:0]
	}
	spent := 0
	hdr := forwardHeaders(r)
	discard := audit.Discards(s.Audit)
	for i, a := range route.Plan {
		n := i + 1
		body := newUpstreamBody()
		ab, aerr := p.build(a, body.b)
		if aerr != nil {
			body.done()
			if n > 1 {
				// The prompt rendered attempt 1's input but not this
				// attempt's shortened one: the plan ends here, as when the
				// budget stops it, with the attempts made (paid for, and
				// failed) kept for review rather than a 400 blaming an
				// input attempt 1 accepted.
				x.logger().Warn("attempt not run: the shortened input cannot fill the route's prompt",
					"route", route.Name, "attempt", n, "cause", aerr.Message)
				return v, s.needsReview(x, p, v, CodeContractViolation)
			}
			return nil, aerr
		}
		body.b = ab.Body // ab.Body is not used past the call
		if n == 1 && route.Budget.InputTooLarge(ab.InputTokens) {
			body.done()
			return nil, badRequest(CodeInputTooLarge, "messages", "input is %d tokens; route %q allows %d", ab.InputTokens, route.Name, route.Budget.MaxInputTokens)
		}
		if route.Budget.Exhausted(spent, ab.InputTokens, route.MaxOutputTokens) {
			body.done()
			return v, s.needsReview(x, p, v, CodeBudgetExhausted)
		}
		actx, done := s.Telemetry.StartAttempt(ctx, AttemptInfo{Route: route.Name, Model: route.Model, Attempt: n, Temperature: a.Temperature})
		start := time.Now()
		comp, err := s.Caller.call(actx, route.Upstream, body, hdr)
		latency := time.Since(start)
		body.done()
		if err != nil {
			done(AttemptResult{Err: err})
			ue, _ := err.(*UpstreamError)
			if ue == nil {
				ue = &UpstreamError{Reason: "call failed"}
			}
			// The attempt ran (and may have been paid for) whether the
			// upstream failed or the client left during it: it is in the
			// audit, as its span is.
			at := audit.Attempt{Attempt: n, Temperature: a.Temperature, Shortened: ab.Shortened, UpstreamStatus: ue.Status,
				LatencyMS: ms(latency), Violations: []contracts.Violation{}}
			x.ev.Attempts = append(x.ev.Attempts, at)
			if r.Context().Err() != nil {
				return nil, errClientClosed()
			}
			return nil, ue.apiError(route.Upstream.Name)
		}
		usage := audit.Usage{PromptTokens: comp.Resp.Usage.PromptTokens, CompletionTokens: comp.Resp.Usage.CompletionTokens, TotalTokens: comp.Resp.Usage.TotalTokens}
		if usage.TotalTokens > 0 {
			spent += usage.TotalTokens
		} else {
			if route.Budget.MaxTotalTokens > 0 {
				spent += ab.InputTokens + p.tokens().Count(comp.Output)
			}
		}
		v.usage = v.usage.Add(usage)

		_, vdone := s.Telemetry.StartValidation(actx)
		subj := p.Subject
		subj.SystemPrompt = ab.System
		res := judge(route.Contract, comp, &subj)
		vdone(len(res.Violations))
		done(AttemptResult{Usage: usage, Finish: comp.Finish, Violations: res.Violations, UpstreamModel: comp.Resp.Model})

		at := audit.Attempt{Attempt: n, Temperature: a.Temperature, Shortened: ab.Shortened, FinishReason: comp.Finish,
			UpstreamStatus: comp.Status, LatencyMS: ms(latency), Usage: usage, Violations: res.Violations,
			Tries: comp.Tries, Answered: true}
		// The output's hash is for the audit line only (the review item
		// hashes the outputs it keeps): none when the sink drops every event.
		if !discard {
			at.OutputSHA256 = shaString(comp.Output)
		}
		if x.st.rt.Audit.IncludeContent {
			out := comp.Output
			at.Output = &out
		}
		x.ev.Attempts = append(x.ev.Attempts, at)
		x.ev.Usage = v.usage
		if x.ev.Budget != nil {
			x.ev.Budget.Used = spent
		}
		v.attempts = append(v.attempts, ReviewAttempt{Attempt: n, Temperature: a.Temperature, Shortened: ab.Shortened,
			FinishReason: comp.Finish, Usage: usage,
			Violations: res.Violations})
		v.outputs = append(v.outputs, comp.Output)
		if res.Valid {
			v.comp, v.result = comp, res
			return v, nil
		}
		comp.release()
	}
	return v, s.needsReview(x, p, v, CodeContractViolation)
}

// judge adds upstream violations (truncation, refusal) to the contract's
// own verdict on the content.
func judge(k *contracts.Contract, comp *Completion, subj *contracts.Subject) contracts.Result {
	var up []contracts.Violation
	switch {
	case comp.Finish == string(openai.FinishReasonLength):
		up = append(up, contracts.Violation{Kind: contracts.KindUpstream, Rule: contracts.RuleOutputTruncated,
			Message: "the model stopped at the token limit (finish_reason length)"})
	case comp.Refusal != "" || comp.Finish == string(openai.FinishReasonContentFilter):
		up = append(up, contracts.Violation{Kind: contracts.KindUpstream, Rule: contracts.RuleModelRefusal,
			Message: "the model refused (refusal or content filter)"})
	}
	if len(up) > 0 && strings.TrimSpace(comp.Output) == "" {
		return contracts.Result{Violations: up, Evidence: []contracts.Evidence{}}
	}
	res := k.Check(comp.Output, subj)
	if len(up) > 0 {
		res.Valid = false
		res.Violations = contracts.SortViolations(append(res.Violations, up...))
	}
	return res
}

// needsReview is the 422 needs_review answer to the attempts in v, under
// the request id as its review id. It only builds the error: contract
// stores the review item (ReviewQueue.save) once attempts returns it.
func (s *Server) needsReview(x *exchange, p *Prepared, v *verdict, code ErrorCode) *APIError {
	k := p.Route.Contract
	attempts := v.attempts
	if attempts == nil {
		attempts = []ReviewAttempt{}
	}
	return needsReviewError(x.ev.RequestID, p.Route.Name, k.Name, code, attempts)
}

// needsReviewError is the 422 of review id: needsReview's, and the one a
// dedupe answer from the review store is rendered as (renderDedupe).
//
// A violation's text that is not valid UTF-8 (an enum message cut at 200
// bytes inside a character) has each invalid byte replaced by U+FFFD
// first, in attempts itself, which the stored item shares: encoding/json
// writes such a byte as the escape \ufffd, but a string read back from
// JSON holds U+FFFD itself, which it writes as is, so a 422 rendered from
// the stored item would differ from the first in those bytes. Either way
// a client decodes the same text.
func needsReviewError(id, route, contract string, code ErrorCode, attempts []ReviewAttempt) *APIError {
	for i := range attempts {
		vs := attempts[i].Violations
		for j := range vs {
			v := &vs[j]
			v.Kind, v.Path, v.Rule, v.Message = jsonText(v.Kind), jsonText(v.Path), jsonText(v.Rule), jsonText(v.Message)
		}
	}
	return &APIError{Status: http.StatusUnprocessableEntity, Type: typeNeedsReview, Code: code, Message: reviewMessage(id, code, attempts),
		Review: &Review{ID: id, Route: route, Contract: contract, Attempts: attempts}}
}

// jsonText is s with each byte that is not part of valid UTF-8 replaced by
// U+FFFD, as encoding/json reads it back (s itself when valid).
func jsonText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// reviewMessage names the review in error.message, because some clients
// (the AI SDK) keep only the message of an error body. The cause is the
// first violation of the first attempt (lists are sorted); the root path ""
// is written "root", which no JSON Pointer can be. With no attempt at all
// (the budget ran out first) the cause is the code.
func reviewMessage(id string, code ErrorCode, attempts []ReviewAttempt) string {
	rule, path := string(code), ""
	if len(attempts) > 0 && len(attempts[0].Violations) > 0 {
		rule, path = attempts[0].Violations[0].Rule, attempts[0].Violations[0].Path
	}
	if path == "" {
		path = "root"
	}
	return "needs review " + id + ": " + strconv.Itoa(len(attempts)) + " attempts failed (" + rule + " at " + path + "); GET /v1/reviews/" + id
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// forwardHeaders picks client headers worth passing upstream on contract
// routes. Never the client's Authorization, and not OpenAI-Organization or
// OpenAI-Project: the route decides which account its key bills.
// (traceparent is injected from the server span, not copied.)
// nil when there is none.
func forwardHeaders(r *http.Request) http.Header {
	var h http.Header
	for _, k := range []string{"X-Request-Id"} {
		if v := r.Header.Values(k); len(v) > 0 {
			if h == nil {
				h = http.Header{}
			}
			h[http.CanonicalHeaderKey(k)] = v
		}
	}
	return h
}

// contractInfo is the success body's extra "contract" member.
type contractInfo struct {
	Route          string               `json:"route"`
	Contract       string               `json:"contract"`
	ContractSHA256 string               `json:"contract_sha256"`
	Attempts       int                  `json:"attempts"`
	Evidence       []contracts.Evidence `json:"evidence"`
}

type successMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type successChoice struct {
	Index        int            `json:"index"`
	Message      successMessage `json:"message"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type successResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	Choices           []successChoice `json:"choices"`
	Usage             audit.Usage     `json:"usage"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	Contract          contractInfo    `json:"contract"`
}

func info(v *verdict, route *config.Route, k *contracts.Contract) contractInfo {
	ev := v.result.Evidence
	if ev == nil {
		ev = []contracts.Evidence{}
	}
	return contractInfo{Route: route.Name, Contract: k.Name, ContractSHA256: k.SHA256, Attempts: len(v.attempts), Evidence: ev}
}

// replyID is the id and creation time the answer gives: the upstream's,
// or ours when it sent none.
func replyID(resp *openai.ChatCompletionResponse) (string, int64) {
	id, created := resp.ID, resp.Created
	if id == "" {
		id = "chatcmpl-contractd"
	}
	if created == 0 {
		created = time.Now().Unix()
	}
	return id, created
}

func successBody(v *verdict, route *config.Route, k *contracts.Contract) successResponse {
	resp := v.comp.Resp
	id, created := replyID(&resp)
	return successResponse{ID: id, Object: "chat.completion", Created: created, Model: resp.Model,
		Choices: []successChoice{{Index: 0, Message: successMessage{Role: "assistant", Content: string(v.result.JSON)}, FinishReason: "stop"}},
		Usage:   v.usage, SystemFingerprint: resp.SystemFingerprint, Contract: info(v, route, k)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(mustJSON(v), '\n'))
}

// ErrNoSuchAttempt is returned by Render for an attempt number outside the
// route's plan.
var ErrNoSuchAttempt = errors.New("no such attempt")

// Render builds the upstream body that attempt n (1-based) of route would
// send for a client request body, without calling anything (`contractd
// render`).
func Render(route *config.Route, body []byte, n int) ([]byte, error) {
	if route.Passthrough {
		obj, err := parseObject(body)
		if err != nil {
			return nil, err
		}
		return obj.apply([]edit{{Name: "model", Value: mustJSON(route.Model)}}), nil
	}
	if n < 1 || n > len(route.Plan) {
		return nil, fmt.Errorf("%w: route %s has %d attempt(s)", ErrNoSuchAttempt, quoteForMessage(route.Name), len(route.Plan))
	}
	p, aerr := Prepare(route, body)
	if aerr != nil {
		return nil, errors.New(aerr.Message)
	}
	var ab *attemptBody
	for i := 0; i < n; i++ {
		if ab, aerr = p.Build(route.Plan[i]); aerr != nil {
			return nil, errors.New(aerr.Message)
		}
	}
	return ab.Body, nil
}
