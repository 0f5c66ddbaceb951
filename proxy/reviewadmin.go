package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
)

// AdminGate guards /admin/*: with admin keys configured every request
// needs one; otherwise requests on the API listener (onListen) need a
// client key when keys are configured and the admin listener needs none.
// Other paths pass through untouched.
func (s *Server) AdminGate(h http.Handler, onListen bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/admin/") {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("X-Request-Id", newRequestID())
		st := s.state.Load()
		switch {
		case len(st.adminKeys) > 0 || st.rt.Server.AdminKeysEnv != "":
			// Named admin keys fail closed: a variable that holds no key
			// (config refuses it; the environment is read again here)
			// lets nobody in rather than everybody.
			sum := sha256.Sum256([]byte(bearerToken(r)))
			ok := 0
			for _, k := range st.adminKeys {
				ok |= subtle.ConstantTimeCompare(sum[:], k[:])
			}
			if ok != 1 || bearerToken(r) == "" {
				writeError(w, &APIError{Status: http.StatusUnauthorized, Type: typeAuth, Code: CodeInvalidAPIKey,
					Message: "missing or invalid admin key (send Authorization: Bearer <admin key>)"})
				return
			}
		case onListen:
			if _, aerr := s.authenticate(st, r); aerr != nil {
				writeError(w, aerr)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// ReviewAdmin is the reviewer API under /admin/ (gate it with AdminGate).
func (s *Server) ReviewAdmin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/reviews", s.withStore(s.listReviews))
	mux.HandleFunc("GET /admin/reviews/export", s.withStore(s.exportReviews))
	mux.HandleFunc("GET /admin/reviews/{id}", s.adminGetReview)
	mux.HandleFunc("POST /admin/reviews/{id}/approve", s.approveReview)
	mux.HandleFunc("POST /admin/reviews/{id}/reject", s.rejectReview)
	mux.HandleFunc("POST /admin/reviews/{id}/rerun", s.rerunReview)
	mux.HandleFunc("POST /admin/check", s.adminCheck)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeNotFound,
			Message: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return mux
}

var errStoreDown = &APIError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: CodeReviewStoreDown,
	Message: "the review store is unavailable; try again"}

// store is the open store or the error to answer with.
func (s *Server) store() (review.Store, *APIError) {
	if s.Reviews == nil {
		return nil, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeReviewNotFound, Message: "review.store is none: no reviews are kept"}
	}
	if st := s.Reviews.Store(); st != nil {
		return st, nil
	}
	return nil, errStoreDown
}

// withStore serves h with the open store, or answers with store's error.
func (s *Server) withStore(h func(http.ResponseWriter, *http.Request, review.Store)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, aerr := s.store()
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		h(w, r, st)
	}
}

func (s *Server) storeError(w http.ResponseWriter, err error) *APIError {
	switch {
	case errors.Is(err, review.ErrNotFound):
		return errReviewNotFound
	case errors.Is(err, review.ErrAlreadyResolved):
		return &APIError{Status: http.StatusConflict, Type: typeInvalidRequest, Code: CodeReviewResolved, Message: "the review is already resolved"}
	case errors.Is(err, review.ErrBadCursor):
		return badRequest(CodeInvalidParameter, "cursor", "cursor is not one this server returned")
	case errors.Is(err, errStoreNotOpen):
		return errStoreDown // not a failed call: Run logs the open's failures
	}
	s.Logger.Error("review store failed", "request_id", w.Header().Get("X-Request-Id"), "error", err.Error())
	return errStoreDown
}

type reviewList struct {
	Items      []*review.Item `json:"items"`
	NextCursor *string        `json:"next_cursor"`
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request, st review.Store) {
	q := r.URL.Query()
	f := review.Filter{Route: q.Get("route"), Contract: q.Get("contract"), Rule: q.Get("rule"), Cursor: q.Get("cursor")}
	if ls := q.Get("limit"); ls != "" {
		n, err := strconv.Atoi(ls)
		if err != nil || n < 1 || n > review.MaxLimit {
			writeError(w, badRequest(CodeInvalidParameter, "limit", "limit must be an integer from 1 to %d", review.MaxLimit))
			return
		}
		f.Limit = n
	}
	var aerr *APIError
	if f.Status, aerr = statusParam(q, ""); aerr != nil {
		writeError(w, aerr)
		return
	}
	items, next, err := st.List(r.Context(), f)
	if err != nil {
		writeError(w, s.storeError(w, err))
		return
	}
	out := reviewList{Items: items}
	if next != "" {
		out.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, out)
}

// statusParam is the status query parameter: empty is dflt (a list's "":
// any status), another value must name a status.
func statusParam(q url.Values, dflt review.Status) (review.Status, *APIError) {
	st := review.Status(q.Get("status"))
	if st == "" {
		st = dflt
	}
	if st != "" && !st.Valid() {
		return "", badRequest(CodeInvalidParameter, "status", "status must be pending, approved or rejected")
	}
	return st, nil
}

func (s *Server) adminGetReview(w http.ResponseWriter, r *http.Request) {
	if s.Reviews == nil {
		writeError(w, errReviewNotFound)
		return
	}
	it, err := s.Reviews.get(r.Context(), r.PathValue("id"))
	s.writeItem(w, it, err)
}

// writeItem answers with a store call's item, or with its error.
func (s *Server) writeItem(w http.ResponseWriter, it *review.Item, err error) {
	if err != nil {
		writeError(w, s.storeError(w, err))
		return
	}
	writeJSON(w, http.StatusOK, it)
}

type exportLine struct {
	ID         string          `json:"id"`
	Route      string          `json:"route"`
	Contract   string          `json:"contract"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	ResolvedAt *time.Time      `json:"resolved_at"`
}

func (s *Server) exportReviews(w http.ResponseWriter, r *http.Request, st review.Store) {
	q := r.URL.Query()
	f := review.ExportFilter{Route: q.Get("route")}
	var aerr *APIError
	if f.Status, aerr = statusParam(q, review.StatusApproved); aerr != nil {
		writeError(w, aerr)
		return
	}
	if since := q.Get("since"); since != "" {
		if d, err := time.ParseDuration(since); err == nil {
			f.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, since); err == nil {
			f.Since = t
		} else {
			writeError(w, badRequest(CodeInvalidParameter, "since", "since must be a duration (24h) or an RFC 3339 time"))
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	// The stream lasts as long as the store has items, which can be longer
	// than request_timeout allows a response: the write deadline moves on
	// while items keep coming, so only a client that stops reading for
	// the write grace cuts it (it cut large exports short, silently).
	rc := http.NewResponseController(w)
	grace := s.WriteGrace
	if grace <= 0 {
		grace = DefaultWriteGrace
	}
	var extended time.Time
	n := 0
	sent := false // a flush reached the client: the status is sent
	err := st.Export(r.Context(), f, func(it *review.Item) error {
		if now := time.Now(); now.Sub(extended) > grace/4 {
			_ = rc.SetWriteDeadline(now.Add(grace))
			extended = now
		}
		var out json.RawMessage = json.RawMessage("null")
		if it.Resolution != nil && len(it.Resolution.Output) > 0 {
			out = it.Resolution.Output
		}
		if err := enc.Encode(exportLine{ID: it.ID, Route: it.Route, Contract: it.Contract.Name, Input: it.Input, Output: out, ResolvedAt: it.ResolvedAt}); err != nil {
			return err
		}
		if n++; n%64 == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
			sent = true
			_ = rc.Flush()
		}
		return nil
	})
	switch {
	case err == nil:
		_ = bw.Flush()
	case r.Context().Err() != nil:
		// The client left: nothing to answer, the store is not at fault.
	case !sent:
		// Nothing has reached the client: the export failed before it
		// began, and is answered as the other reviewer endpoints answer
		// a store that fails (503 review_store_unavailable). It was a 200
		// with what the buffer held, often nothing: an empty or partial
		// file that looked like a whole export (a store that hung, or was
		// down, exported "no approved items").
		bw.Reset(io.Discard)
		w.Header().Del("Content-Type")
		writeError(w, s.storeError(w, err))
	default:
		// Headers are gone: the whole lines read so far go out, then the
		// response is cut without its end (the chunked stream's last
		// chunk), so the client sees a transfer that failed rather than a
		// shorter export that ended normally.
		s.Logger.Warn("review export stopped", "request_id", w.Header().Get("X-Request-Id"), "error", err.Error())
		_ = bw.Flush()
		_ = rc.Flush()
		panic(http.ErrAbortHandler)
	}
}

// readAdminJSON reads a bounded JSON object body into v.
func (s *Server) readAdminJSON(w http.ResponseWriter, r *http.Request, v any) *APIError {
	srv := &s.state.Load().rt.Server
	b, aerr := s.readBody(r.Context(), r, srv.MaxBodyBytes, srv.MaxInflightBytes)
	if aerr != nil {
		return aerr
	}
	defer s.release(b)
	body := b.buf
	if _, err := parseObject(body); err != nil {
		return badRequest(CodeInvalidJSON, "", "request body is not a valid JSON object: %s", jsonErr(err))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return badRequest(CodeInvalidJSON, "", "request body does not have the expected shape: %s", err.Error())
	}
	return nil
}

func missingField(name string) *APIError {
	return badRequest(CodeMissingField, name, "%s is required", name)
}

type resolveBody struct {
	Output   json.RawMessage `json:"output"`
	Reviewer string          `json:"reviewer"`
	Note     string          `json:"note"`
}

// outputText turns an approve/check output into model text: a string is
// the text itself, anything else its JSON.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// reviewSubject rebuilds what serving judged the item's attempts with:
// the stored request prepared by the route's current config, and the
// rendered system prompt of attempt 1 for prompt_leak.
func reviewSubject(route *config.Route, it *review.Item) (*Prepared, contracts.Subject, *APIError) {
	p, aerr := PrepareAny(route, it.Request) // the client's body: chat or Responses
	if aerr != nil {
		return nil, contracts.Subject{}, aerr
	}
	subj := p.Subject
	if ab, aerr := p.Build(route.Plan[0]); aerr == nil {
		subj.SystemPrompt = ab.System
	}
	return p, subj, nil
}

// pendingReview is a pending item with its current route, prepared as
// serving would prepare its request: what approve and rerun start from.
type pendingReview struct {
	st    review.Store
	it    *review.Item
	route *config.Route
	p     *Prepared
	subj  contracts.Subject
}

func (s *Server) pendingReview(w http.ResponseWriter, r *http.Request) (*pendingReview, *APIError) {
	st, aerr := s.store()
	if aerr != nil {
		return nil, aerr
	}
	it, err := st.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, s.storeError(w, err)
	}
	if it.Status != review.StatusPending {
		return nil, s.storeError(w, review.ErrAlreadyResolved)
	}
	route, aerr := s.contractRoute(it.Route)
	if aerr != nil {
		return nil, aerr
	}
	p, subj, aerr := reviewSubject(route, it)
	if aerr != nil {
		return nil, aerr
	}
	return &pendingReview{st: st, it: it, route: route, p: p, subj: subj}, nil
}

func (s *Server) contractRoute(name string) (*config.Route, *APIError) {
	route := s.state.Load().rt.Routes[name]
	if route == nil || route.Passthrough {
		return nil, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeModelNotFound, Param: strPtr("route"),
			Message: "route " + quoteForMessage(name) + " is not a contract route in the current config"}
	}
	return route, nil
}

func (s *Server) approveReview(w http.ResponseWriter, r *http.Request) {
	var b resolveBody
	if aerr := s.readAdminJSON(w, r, &b); aerr != nil {
		writeError(w, aerr)
		return
	}
	switch {
	case len(b.Output) == 0 || string(b.Output) == "null":
		writeError(w, missingField("output"))
		return
	case b.Reviewer == "":
		writeError(w, missingField("reviewer"))
		return
	}
	pr, aerr := s.pendingReview(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	st, it, route, subj := pr.st, pr.it, pr.route, pr.subj
	text := outputText(b.Output)
	if !json.Valid([]byte(text)) {
		writeError(w, badRequest(CodeInvalidJSON, "output", "output must be a JSON object or a string holding one"))
		return
	}
	res := route.Contract.Check(text, &subj)
	if !res.Valid {
		writeError(w, &APIError{Status: http.StatusUnprocessableEntity, Type: typeNeedsReview, Code: CodeContractViolation,
			Message: "the output does not satisfy contract " + quoteForMessage(route.Contract.Name), Violations: res.Violations})
		return
	}
	s.resolve(w, r, st, it.ID, review.Resolve{Status: review.StatusApproved,
		Resolution: review.Resolution{By: review.ByReviewer, Reviewer: b.Reviewer, Note: b.Note, Output: json.RawMessage(res.JSON)}})
}

func (s *Server) rejectReview(w http.ResponseWriter, r *http.Request) {
	var b resolveBody
	if aerr := s.readAdminJSON(w, r, &b); aerr != nil {
		writeError(w, aerr)
		return
	}
	if b.Reviewer == "" {
		writeError(w, missingField("reviewer"))
		return
	}
	st, aerr := s.store()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.resolve(w, r, st, r.PathValue("id"), review.Resolve{Status: review.StatusRejected,
		Resolution: review.Resolution{By: review.ByReviewer, Reviewer: b.Reviewer, Note: b.Note, Output: json.RawMessage("null")}})
}

// resolve applies a resolution (the store's conditional update picks the
// one winner) and announces it.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, st review.Store, id string, res review.Resolve) {
	res.At = time.Now().UTC()
	res.Webhook = s.Reviews.Webhook
	it, err := st.Resolve(context.WithoutCancel(r.Context()), id, res)
	if err != nil {
		writeError(w, s.storeError(w, err))
		return
	}
	s.resolved(w, it)
	writeJSON(w, http.StatusOK, it)
}

func (s *Server) resolved(w http.ResponseWriter, it *review.Item) {
	q := s.Reviews
	q.Notifier.Notify(it.ID)
	q.Metrics.Resolved(it.Route, it.Status, it.Resolution.By)
	if rw, ok := s.Audit.(audit.ResolvedWriter); ok {
		sum := ""
		if o := it.Resolution.Output; len(o) > 0 && string(o) != "null" {
			sum = sha(o)
		}
		if err := rw.WriteResolved(&audit.ResolvedEvent{Event: audit.EventReviewResolved, Time: *it.ResolvedAt, ReviewID: it.ID,
			Route: it.Route, Status: string(it.Status), By: string(it.Resolution.By), Reviewer: it.Resolution.Reviewer, OutputSHA256: sum}); err != nil {
			s.auditFailed(w.Header().Get("X-Request-Id"), err)
		}
	}
}

func (s *Server) rerunReview(w http.ResponseWriter, r *http.Request) {
	pr, aerr := s.pendingReview(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	st, it, route, p := pr.st, pr.it, pr.route, pr.p
	sst := s.state.Load()
	ctx, cancel := context.WithTimeout(r.Context(), sst.rt.Server.RequestTimeout)
	defer cancel()
	x := &exchange{s: s, st: sst, start: time.Now(), ev: &audit.Event{Time: time.Now().UTC(), RequestID: it.ID, Route: route.Name},
		log: s.Logger.With("request_id", w.Header().Get("X-Request-Id"), "review_id", it.ID)}
	v, aerr := s.attempts(ctx, r, x, p)
	if t, ok := s.Telemetry.(RerunTelemetry); ok {
		t.RerunDone(ctx, x.ev) // the tokens and calls spent, whatever the rerun's end
	}
	if aerr != nil && aerr.Review == nil {
		writeError(w, aerr)
		return
	}
	offset := 0
	for _, a := range it.Attempts {
		offset = max(offset, a.Attempt)
	}
	var atts []review.Attempt
	if v != nil {
		atts = storedAttempts(v.attempts, v.outputs, offset)
	}
	if aerr == nil {
		s.resolve(w, r, st, it.ID, review.Resolve{Status: review.StatusApproved, Attempts: atts,
			Resolution: review.Resolution{By: review.ByRerun, Output: json.RawMessage(v.result.JSON)}})
		return
	}
	it, err := st.AppendAttempts(context.WithoutCancel(r.Context()), it.ID, atts)
	s.writeItem(w, it, err)
}

type checkBody struct {
	Route    string          `json:"route"`
	Contract string          `json:"contract"`
	Output   json.RawMessage `json:"output"`
	Input    json.RawMessage `json:"input"`
}

type checkVerdict struct {
	Valid      bool                  `json:"valid"`
	Violations []contracts.Violation `json:"violations"`
	Evidence   []contracts.Evidence  `json:"evidence"`
}

func (s *Server) adminCheck(w http.ResponseWriter, r *http.Request) {
	var b checkBody
	if aerr := s.readAdminJSON(w, r, &b); aerr != nil {
		writeError(w, aerr)
		return
	}
	if len(b.Output) == 0 {
		writeError(w, missingField("output"))
		return
	}
	rt := s.state.Load().rt
	var k *contracts.Contract
	var route *config.Route
	switch {
	case b.Route != "":
		var aerr *APIError
		if route, aerr = s.contractRoute(b.Route); aerr != nil {
			writeError(w, aerr)
			return
		}
		k = route.Contract
	case b.Contract != "":
		if k = rt.Contracts[b.Contract]; k == nil {
			writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeContractNotFound, Param: strPtr("contract"),
				Message: "unknown contract " + quoteForMessage(b.Contract)})
			return
		}
	default:
		writeError(w, missingField("route"))
		return
	}
	// The input as `contractd check --input FILE` reads its file: a
	// string is the file's text, an object (or any other JSON value) the
	// file holding that JSON. Either way the text is the last user message,
	// and the input object is that text decoded when it is JSON.
	subj := contracts.Subject{}
	if len(b.Input) > 0 && string(b.Input) != "null" {
		text := []byte(b.Input)
		var str string
		if json.Unmarshal(b.Input, &str) == nil {
			text = []byte(str)
		}
		subj.LastUser, subj.HasLastUser = string(text), true
		if v, err := contracts.DecodeJSON(text); err == nil {
			subj.Input = v
		}
	}
	if route != nil {
		// As `contractd check --route`: the prompt rendered with the input,
		// or without one with the prompt's example_input (which evidence
		// sources then point into), so prompt_leak is judged either way.
		p := route.Prompt
		var data contracts.TemplateData
		switch {
		case subj.HasLastUser && p.InputSchema != nil:
			data.Input = subj.Input
		case subj.HasLastUser:
			data.Input = subj.LastUser
		case p.InputSchema != nil:
			data.Input, subj.Input = p.ExampleInput, p.ExampleInput
		default:
			s, _ := p.ExampleInput.(string)
			data.Input = s
		}
		if subj.HasLastUser {
			data.Messages = []contracts.Message{{Role: "user", Content: subj.LastUser}}
		}
		if sys, err := p.RenderSystem(data); err == nil {
			subj.SystemPrompt = sys
		}
	}
	res := k.Check(outputText(b.Output), &subj)
	out := checkVerdict{Valid: res.Valid, Violations: res.Violations, Evidence: res.Evidence}
	if out.Violations == nil {
		out.Violations = []contracts.Violation{}
	}
	if out.Evidence == nil {
		out.Evidence = []contracts.Evidence{}
	}
	writeJSON(w, http.StatusOK, out)
}
