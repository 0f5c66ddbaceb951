package proxy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/jsonlog"
	"github.com/contractd/contractd/internal/panics"
)

// Server serves the OpenAI-compatible API over the current Runtime.
// Swap installs a new Runtime atomically; a request keeps the Runtime it
// started with until it ends.
type Server struct {
	Caller    *Caller
	Audit     audit.Sink
	Telemetry Telemetry
	Logger    *slog.Logger
	// Reviews stores needs_review items; nil with review.store: none.
	Reviews *ReviewQueue
	// Panics counts recovered panics (nil: not counted).
	Panics PanicMetrics
	// Env reads environment variables (client keys); os.Getenv by default.
	Env func(string) string

	// WriteGrace is how long past request_timeout a response may take to
	// be written (0: DefaultWriteGrace).
	WriteGrace time.Duration
	// Conns caps connections on listen (server.max_connections); serve
	// wraps the API listener with Conns.Listener.
	Conns ConnLimit

	state    atomic.Pointer[state]
	limit    rateLimiter
	dedupe   *dedupe
	inflight budget // server.max_inflight_bytes

	schemaNotes schemaNotes // X-Contract-Schema-Replaced's once-only warnings
	auditWarn   warnEvery   // 'audit write failed': once a minute
	passProxies sync.Pool   // *passProxy

	draining  chan struct{} // closed by Drain: held review polls answer now
	drainOnce sync.Once
}

// state is a Runtime with what is derived from it at install time.
type state struct {
	rt        *config.Runtime
	keys      [][32]byte // SHA-256 of the client keys; empty: no auth
	adminKeys [][32]byte // SHA-256 of the admin keys; empty: the client-key rule
	pass      map[passKey]*passPlan
}

// NewServer returns a Server for rt.
func NewServer(rt *config.Runtime, caller *Caller, sink audit.Sink, logger *slog.Logger) *Server {
	s := &Server{Caller: caller, Audit: sink, Logger: logger, Env: os.Getenv, Telemetry: nopTelemetry{}, dedupe: newDedupe(DedupeMaxEntries),
		draining: make(chan struct{})}
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	s.Conns.Max = func() int { return s.state.Load().rt.Server.MaxConnections }
	if caller != nil && caller.replies == nil {
		// Upstream replies share the request bodies' budget.
		caller.replies = &s.inflight
		caller.repliesSize = func() int64 { return s.state.Load().rt.Server.MaxInflightBytes }
	}
	s.Swap(rt)
	return s
}

// Swap installs rt for new requests.
func (s *Server) Swap(rt *config.Runtime) {
	st := &state{rt: rt, pass: passPlans(rt)}
	st.keys = s.readKeys(rt.Server.APIKeysEnv)
	st.adminKeys = s.readKeys(rt.Server.AdminKeysEnv)
	s.state.Store(st)
	s.limit.logger.Store(s.Logger)
	s.limit.configure(rt.Server.RateLimit, s.Env)
}

// Close releases what the Server holds open: the Redis rate-limit
// store's connections. Requests after Close are not rate limited.
func (s *Server) Close() { s.limit.close() }

// SetRateLimitMetrics counts the rate-limit store's failures in m.
func (s *Server) SetRateLimitMetrics(m RateLimitMetrics) { s.limit.metrics.Store(m) }

func (s *Server) readKeys(env string) [][32]byte {
	var out [][32]byte
	if env != "" {
		for _, k := range strings.Split(s.Env(env), ",") {
			if k = strings.TrimSpace(k); k != "" {
				out = append(out, sha256.Sum256([]byte(k)))
			}
		}
	}
	return out
}

// Drain is called when the server starts to drain: review polls held by
// ?wait= answer the item as it is at once (the client polls again,
// elsewhere), rather than hold the drain for up to a minute and be cut
// at shutdown_timeout with a non-zero exit.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Runtime is the Runtime new requests use.
func (s *Server) Runtime() *config.Runtime { return s.state.Load().rt }

// AuthEnabled reports whether client keys are configured.
func (s *Server) AuthEnabled() bool { return len(s.state.Load().keys) > 0 }

// AuthEnabledIn reports whether rt's server.api_keys_env holds a client
// key, as Swap would read it.
func (s *Server) AuthEnabledIn(rt *config.Runtime) bool {
	return len(s.readKeys(rt.Server.APIKeysEnv)) > 0
}

// Handler is the API: chat completions and models, plus the admin
// endpoints when admin is non-nil (admin_listen "").
func (s *Server) Handler(admin http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(patChat, s.chat)
	mux.HandleFunc(patRouteChat, s.chat)
	mux.HandleFunc(patResponses, s.responses)
	mux.HandleFunc(patRouteResponses, s.responses)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /r/{route}/v1/models", s.models)
	mux.HandleFunc("GET /v1/models/{model}", s.model)
	mux.HandleFunc("GET /r/{route}/v1/models/{model}", s.model)
	mux.HandleFunc("GET /v1/reviews/{id}", s.getReview)
	for _, p := range storedResponsePatterns {
		mux.HandleFunc(p, s.storedResponse)
	}
	if admin != nil {
		mux.Handle("GET /healthz", admin)
		mux.Handle("GET /readyz", admin)
		mux.Handle("/metrics", s.requireKey(admin))
		mux.Handle("/admin/", s.AdminGate(admin, true))
		mux.Handle("/review/", admin) // the page; its API calls go to /admin/
		mux.Handle("GET /review", admin)
	}
	mux.HandleFunc("/", notFound)
	// The POST edges exactPaths serves itself recover their own panics
	// (exchange.recoverPanic); everything the ServeMux serves goes through
	// the same gate here, outside the hot path. Deadlines and exactPaths in
	// one handler: the request's arrival is read from the clock once, for
	// its deadlines and its exchange.
	next := s.RecoverPanics(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		s.deadlines(w, r, now)
		s.exactPaths(w, r, next, now)
	})
}

func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Request-Id", newRequestID())
	writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeNotFound,
		Message: "no such endpoint: " + r.Method + " " + quoteForMessage(r.URL.Path)})
}

// exactPaths matches paths as sent. ServeMux would answer a
// path with "..", "//" or "." segments with a redirect to its cleaned form,
// which can name another route; such a path under /r/ is an unknown route
// (404 model_not_found, audited like any chat request), and elsewhere no
// endpoint. A route segment holding an encoded "/" or naming "." or ".."
// is an unknown route too.
func (s *Server) exactPaths(w http.ResponseWriter, r *http.Request, next http.Handler, now time.Time) {
	p := r.URL.Path
	if plainPath(r.URL) || (cleanPath(p) && (!strings.HasPrefix(p, "/r/") || goodRouteSegment(r))) {
		if e, name, pattern := apiEdge(r.Method, p); e != nil {
			r.Pattern = pattern // as the ServeMux sets it: the HTTP metric's http.route
			s.serveRoute(w, r, e, name, false, now)
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	// Not matched by the ServeMux: an unknown path, whose pattern (the
	// HTTP metric's http.route) is its catch-all "/".
	r.Pattern = "/"
	if !strings.HasPrefix(p, "/r/") {
		notFound(w, r)
		return
	}
	name, _, _ := strings.Cut(p[len("/r/"):], "/")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/chat/completions"):
		s.serveRoute(w, r, chatEdge, name, true, now)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/responses"):
		s.serveRoute(w, r, responsesEdge, name, true, now)
	default:
		w.Header().Set("X-Request-Id", newRequestID())
		writeError(w, uncleanRoutePath(r))
	}
}

// cleanPath reports whether p is path.Clean's form, or that form with a
// trailing "/".
func cleanPath(p string) bool {
	clean := path.Clean(p)
	return clean == p || clean+"/" == p
}

// plainPath reports, for the paths nearly all requests have, what
// cleanPath and goodRouteSegment would find, in one pass: a path sent
// without escapes (RawPath empty, no "%") of letters, digits, "-", "_",
// "~" and single "/"s has no "." or ".." segment and no encoded "/", and
// is clean, or clean with a trailing "/". Anything else (false) is
// checked by them.
func plainPath(u *url.URL) bool {
	p := u.Path
	if u.RawPath != "" || p == "" || p[0] != '/' {
		return false
	}
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/':
			if p[i-1] == '/' {
				return false
			}
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

// uncleanRoutePath is the 404 for a /r/ path that is not matched as sent:
// naming the route it seems to hold ("classify" for /r/classify//v1/…)
// would read as if that route did not exist.
func uncleanRoutePath(r *http.Request) *APIError {
	e := unknownRoute("")
	e.Message = "path " + quoteForMessage(r.URL.EscapedPath()) + ` names no route: route paths are matched as sent, without "..", ".", "//" or an encoded "/"`
	return e
}

// The POST edges' ServeMux patterns.
const (
	patChat           = "POST /v1/chat/completions"
	patRouteChat      = "POST /r/{route}/v1/chat/completions"
	patResponses      = "POST /v1/responses"
	patRouteResponses = "POST /r/{route}/v1/responses"
)

// apiEdge matches a clean path against the POST edges' patterns before the
// ServeMux does: the same edge, route name and pattern it would find, for
// the requests nearly all traffic is, without its matching and PathValue
// bookkeeping. Anything else (nil edge) goes to the ServeMux. The path's
// route segment was checked by goodRouteSegment (no encoded "/"), so
// r.URL.Path's segment is the one the ServeMux would unescape.
func apiEdge(method, p string) (e *edge, name, pattern string) {
	if method != http.MethodPost {
		return nil, "", ""
	}
	switch p {
	case "/v1/chat/completions":
		return chatEdge, "", patChat
	case "/v1/responses":
		return responsesEdge, "", patResponses
	}
	rest, ok := strings.CutPrefix(p, "/r/")
	if !ok {
		return nil, "", ""
	}
	name, tail, ok := strings.Cut(rest, "/")
	if !ok || name == "" {
		return nil, "", ""
	}
	switch tail {
	case "v1/chat/completions":
		return chatEdge, name, patRouteChat
	case "v1/responses":
		return responsesEdge, name, patRouteResponses
	}
	return nil, "", ""
}

// goodRouteSegment reports whether /r/{route}/ names a route literally:
// not "." or "..", and no encoded "/" (which ServeMux would decode into
// the name).
func goodRouteSegment(r *http.Request) bool {
	seg, _, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/r/"), "/")
	if strings.Contains(strings.ToLower(seg), "%2f") {
		return false
	}
	name, err := url.PathUnescape(seg)
	return err == nil && name != "." && name != ".."
}

func unknownRoute(name string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeModelNotFound,
		Param: strPtr("model"), Message: "unknown route " + quoteForMessage(name) + "; GET /v1/models lists the routes"}
}

func (s *Server) requireKey(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// X-Request-Id is on every response, a 401 here included.
		w.Header().Set("X-Request-Id", newRequestID())
		if _, aerr := s.authenticate(s.state.Load(), r); aerr != nil {
			writeError(w, aerr)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authenticate checks the bearer key against every configured key. Both
// sides are SHA-256 digests compared in constant time, so neither a prefix
// nor the key's length shows in the timing. It returns the matched key's
// index (the client's identity for rate limiting), or -1 without auth.
func (s *Server) authenticate(st *state, r *http.Request) (int, *APIError) {
	if len(st.keys) == 0 {
		return -1, nil
	}
	got := bearerToken(r)
	sum := sha256.Sum256([]byte(got))
	match := -1
	for i, k := range st.keys {
		if subtle.ConstantTimeCompare(sum[:], k[:]) == 1 {
			match = i
		}
	}
	if match >= 0 && got != "" {
		return match, nil
	}
	return -1, &APIError{Status: http.StatusUnauthorized, Type: typeAuth, Code: CodeInvalidAPIKey,
		Message: "missing or invalid API key (send Authorization: Bearer <key>)"}
}

// bearerToken reads "Authorization: Bearer <token>"; the scheme is
// case-insensitive (RFC 9110) and surrounding spaces are ignored.
func bearerToken(r *http.Request) string {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(h) >= 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func newRequestID() string {
	var r [12]byte
	idRand.read(r[:])
	b := [4 + 24]byte{'r', 'e', 'q', '_'}
	hex.Encode(b[4:], r[:])
	return string(b[:]) // one allocation
}

// idRand hands out crypto/rand's bytes for request ids from a buffer it
// fills 4 KiB at a time: one call into crypto/rand per 341 ids instead of
// one each, whose code and state are cold again by the next request when
// requests come one at a time.
var idRand randBuffer

type randBuffer struct {
	mu  sync.Mutex
	buf [4092]byte // 341 ids of 12 bytes
	off int        // bytes of buf handed out; 0 before the first fill
}

func (rb *randBuffer) read(p []byte) {
	rb.mu.Lock()
	if rb.off == 0 || rb.off+len(p) > len(rb.buf) {
		_, _ = rand.Read(rb.buf[:])
		rb.off = 0
	}
	rb.off += copy(p, rb.buf[rb.off:])
	rb.mu.Unlock()
}

// exchange is one chat-completions or responses request in flight: its
// audit event is filled as it goes and written once, before the response
// completes.
type exchange struct {
	s      *Server
	st     *state
	edge   *edge
	ev     *audit.Event
	start  time.Time
	log    *slog.Logger
	keyID  string      // the client key's id for review items
	keySum string      // the client key's full SHA-256 (hex), for the dedupe key
	body   []byte      // the client's body as received
	event  audit.Event // ev's memory on the API edges: one allocation for both
	// The request body's buffer and its top-level members, in the same
	// allocation.
	reqBody body
	members [8]member
	idValue [1]string // X-Request-Id's header value
	// finished is set when the audit event is being written (finish), so a
	// panic after it does not write a second one; responding when a
	// passthrough relay may have sent the response's headers.
	finished   bool
	responding bool
}

func (x *exchange) finish(ctx context.Context, status int, outcome audit.Outcome, code ErrorCode) {
	x.finished = true
	x.ev.Event, x.ev.Status, x.ev.Outcome, x.ev.ErrorCode = audit.EventRequest, status, outcome, string(code)
	now := time.Now() // the request's end, and its log line's time
	x.ev.DurationMS = float64(now.Sub(x.start).Microseconds()) / 1000
	if x.ev.Attempts == nil {
		x.ev.Attempts = []audit.Attempt{}
	}
	auditErr := x.s.Audit.Write(x.ev)
	if auditErr != nil {
		x.s.auditFailed(x.ev.RequestID, auditErr)
	}
	x.s.Telemetry.RequestDone(ctx, x.ev)
	lvl := slog.LevelInfo
	if status >= 500 {
		lvl = slog.LevelWarn
	}
	// The one line most requests log: its attributes as typed values, and
	// request_id first as a logger from x.logger() would write it, without
	// building that logger. It goes to the handler directly (the Logger
	// would also capture the caller's PC, which no handler here prints: no
	// AddSource), as its fields when the handler writes them itself
	// (serve's, jsonlog.RequestHandler), else as its record.
	if h := x.s.Logger.Handler(); h.Enabled(ctx, lvl) {
		l := jsonlog.Request{Time: now, Level: lvl, RequestID: x.ev.RequestID, Route: x.ev.Route,
			Outcome: string(outcome), Status: status, Attempts: len(x.ev.Attempts), DurationMS: x.ev.DurationMS,
			ErrorCode:   string(code),    // absent on a 200, as in the audit line
			AuditFailed: auditErr != nil, // this request's own trace of its missing line
		}
		if rh, ok := h.(jsonlog.RequestHandler); ok {
			_ = rh.HandleRequest(ctx, l)
		} else {
			_ = h.Handle(ctx, l.Record())
		}
	}
}

// auditFailed logs an audit line the sink could not write (request
// requestID's or a review resolution's), at most once a minute with the
// failures since the last line logged (failed_writes, this one included):
// on a full disk every request's write fails, and a line each flooded the
// log exactly then. contractd_audit_write_errors_total counts every one,
// and each request's own "request" line says audit_failed.
func (s *Server) auditFailed(requestID string, err error) {
	if n, ok := s.auditWarn.allow(); ok {
		s.Logger.Error("audit write failed", "request_id", requestID, "error", err.Error(), "failed_writes", n)
	}
}

// logger is the request's logger (request_id on every line), built on
// first use.
func (x *exchange) logger() *slog.Logger {
	if x.log == nil {
		x.log = x.s.Logger.With("request_id", x.ev.RequestID)
	}
	return x.log
}

// fail answers with e and records the outcome.
func (x *exchange) fail(ctx context.Context, w http.ResponseWriter, e *APIError, outcome audit.Outcome) {
	e = accepted(e) // as writeError answers it: the audit and metrics agree with the client
	if e.Internal != nil {
		x.logger().Warn("request failed", "code", e.Code, "cause", e.Internal.Error())
	}
	x.finish(ctx, e.Status, outcome, e.Code)
	writeError(w, e)
}

// outcomePanic is the audit outcome of a request whose handling panicked.
// The audit's outcomes (valid, needs_review, rejected, upstream_error,
// passthrough) have none for contractd's own failure; rejected is the
// closest: contractd gave no answer of its own, as with 503 server_busy,
// while upstream_error would blame (and page about) an upstream that did
// nothing wrong. The status (500) and error_code (internal_error) tell it
// apart (docs/observability.md).
const outcomePanic = audit.OutcomeRejected

// errInternal is the answer to a request whose handling panicked: nothing
// of the cause reaches the client (it is in the log, with the stack).
func errInternal() *APIError {
	return &APIError{Status: http.StatusInternalServerError, Type: typeServer, Code: CodeInternal,
		Message: "internal error; the request id names it in contractd's log"}
}

// recoverPanic ends an exchange whose handling panicked as every request
// ends: one audit line and its metrics (unless finish already wrote them),
// and a 500 envelope when no response has started. Without it net/http
// recovers the panic itself: the client sees the connection drop, and no
// audit line or metric records the request. The panic's type, a
// description without its value (which may hold request or model text or
// a key) and its stack go to the log (logPanic). http.ErrAbortHandler is a deliberate abort (a passthrough relay
// cut short, already audited) and goes on to net/http. A response that
// may have started cannot be followed by a clean answer: the connection
// is aborted instead, as net/http would.
func (x *exchange) recoverPanic(ctx context.Context, w http.ResponseWriter) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	x.s.panics().Panic(PanicRequest)
	logPanic(x.logger(), "panic serving request", panics.New(p), "route", x.ev.Route)
	if x.finished || x.responding {
		if !x.finished {
			x.finish(ctx, http.StatusInternalServerError, outcomePanic, CodeInternal)
		}
		panic(http.ErrAbortHandler)
	}
	x.fail(ctx, w, errInternal(), outcomePanic)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.serveRoute(w, r, chatEdge, r.PathValue("route"), false, time.Now())
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	s.serveRoute(w, r, responsesEdge, r.PathValue("route"), false, time.Now())
}

// serveRoute is every POST edge: the same checks in the same order, then
// the passthrough relay or the one contract pipeline. pathName is the
// route named by the path ("": the body's model); badPath says the path
// cannot name a route, so the request ends at the route check. start is
// the request's arrival.
func (s *Server) serveRoute(w http.ResponseWriter, r *http.Request, e *edge, pathName string, badPath bool, start time.Time) {
	st := s.state.Load()
	id := newRequestID()
	x := &exchange{s: s, st: st, edge: e, start: start, event: audit.Event{Time: start.UTC(), RequestID: id, API: e.api}, idValue: [1]string{id}}
	x.ev = &x.event
	w.Header()["X-Request-Id"] = x.idValue[:] // canonical: no Set needed
	// request_timeout counts from the arrival already read (start): no
	// second clock read for it.
	ctx, cancel := context.WithDeadline(r.Context(), start.Add(st.rt.Server.RequestTimeout))
	// Two defers and one return here, the rest in route: the compiler
	// inlines defers only in a function with few returns.
	defer cancel()
	defer x.recoverPanic(ctx, w) // before cancel: its audit and metrics read ctx
	s.route(ctx, cancel, w, r, x, pathName, badPath)
}

// route is serveRoute's checks and pipeline for exchange x.
func (s *Server) route(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request, x *exchange, pathName string, badPath bool) {
	st, e := x.st, x.edge
	rt := st.rt
	client, aerr := s.authenticate(st, r)
	if aerr != nil {
		x.fail(ctx, w, aerr, audit.OutcomeRejected)
		return
	}
	if client >= 0 {
		x.keySum = sha([]byte(bearerToken(r)))
		x.keyID = x.keySum[:12]
	}
	if aerr := s.limit.allow(ctx, x.keyID); aerr != nil {
		x.fail(ctx, w, aerr, audit.OutcomeRejected)
		return
	}
	b := &x.reqBody
	if aerr := s.readBodyInto(ctx, b, r, rt.Server.MaxBodyBytes, rt.Server.MaxInflightBytes); aerr != nil {
		x.fail(ctx, w, aerr, audit.OutcomeRejected)
		return
	}
	// The body is decoded in place: everything read from it (the member
	// list, messages, input) aliases the pooled buffer, which goes back
	// when the exchange ends. What outlives it (audit, review items) is
	// copied where it is kept.
	defer s.release(b)
	body := b.buf
	x.body = body
	obj, err := appendObject(x.members[:0], body)
	if err != nil {
		x.fail(ctx, w, badRequest(CodeInvalidJSON, "", "request body is not a valid JSON object: %s", jsonErr(err)), audit.OutcomeRejected)
		return
	}
	name := pathName
	if name == "" && !badPath {
		if v, ok := obj.get("model"); ok && v.Kind() == '"' {
			name = stringValue(v) // a plain name is copied, not decoded by reflection
		}
	}
	route := rt.Routes[name]
	x.ev.Route = name
	if route == nil || badPath {
		// Unknown names are client-chosen: bound what reaches the audit and logs.
		x.ev.Route = truncate(name, 128)
		aerr := unknownRoute(name)
		switch {
		case badPath:
			aerr = uncleanRoutePath(r)
		case name == "" && pathName == "":
			// Missing, empty or not a string: `unknown route ""` would
			// read as a route with an empty name.
			aerr.Message = "model must name a route (a non-empty string); GET /v1/models lists the routes"
		}
		x.fail(ctx, w, aerr, audit.OutcomeRejected)
		return
	}
	if route.Passthrough {
		s.passthrough(ctx, cancel, w, r, x, route, obj)
		return
	}
	var msgs []clientMessage
	if e.adapt != nil {
		if obj, msgs, aerr = e.adapt(route, obj); aerr != nil {
			x.ev.Prompt = &audit.Ref{Name: route.Prompt.Name, SHA256: route.Prompt.SHA256}
			x.ev.Contract = &audit.Ref{Name: route.Contract.Name, SHA256: route.Contract.SHA256}
			x.fail(ctx, w, aerr, audit.OutcomeRejected)
			return
		}
	}
	s.contract(ctx, w, r, x, route, obj, msgs)
}

func strPtr(s string) *string { return &s }

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func quoteForMessage(s string) string { return `"` + truncate(s, 100) + `"` }

// bodyReadError is the answer to a body that could not be read: 408 when
// body_read_timeout passed with the client still there, else the client
// left mid-upload (499, audited; nobody reads the reply).
func bodyReadError(err error) *APIError {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &APIError{Status: http.StatusRequestTimeout, Type: typeInvalidRequest, Code: CodeRequestTimeout,
			Message: "the request body was not received within the server's body_read_timeout"}
	}
	return errClientClosed()
}

func unquoteJSON(v []byte) string {
	var s string
	if err := jsonUnmarshal(v, &s); err != nil {
		return ""
	}
	return s
}
