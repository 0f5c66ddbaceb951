package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
	"unsafe"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
)

// passPlan is what a passthrough route forwards to on one edge, worked
// out once per Runtime (Swap) rather than per request: the upstream URL
// and the route's model as a JSON string.
type passPlan struct {
	target *url.URL // nil: the base URL does not parse (502 per request)
	model  []byte
}

type passKey struct {
	route *config.Route
	edge  *edge
}

// passPlans plans every passthrough route of rt on both edges.
func passPlans(rt *config.Runtime) map[passKey]*passPlan {
	plans := map[passKey]*passPlan{}
	for _, r := range rt.RouteList {
		if !r.Passthrough {
			continue
		}
		for _, e := range []*edge{chatEdge, responsesEdge} {
			p := &passPlan{model: mustJSON(r.Model)}
			if u, err := url.Parse(r.Upstream.BaseURL + e.upstreamPath); err == nil {
				p.target = u
			}
			plans[passKey{r, e}] = p
		}
	}
	return plans
}

// passCall is one passthrough call in flight. It is the outgoing
// request's context too (the request's, which ends at request_timeout or
// at the upstream's header timeout), so the Server's one ReverseProxy
// finds the call from the request it is handed without a closure, a
// context value or a proxy built per request.
type passCall struct {
	context.Context
	s         *Server
	x         *exchange
	route     *config.Route
	target    *url.URL
	body      []byte
	clientCtx context.Context // ends when the client goes away
	in        *http.Request   // the client's request: its bearer token is redacted from error bodies
	timer     *time.Timer     // the upstream's header timeout
	status    int
	failed    *APIError
	broken    *APIError        // the relayed event stream broke off (sserelay.go)
	start     time.Time        // the call's start, for its attempt's latency
	attempts  [1]audit.Attempt // the audit's attempt list, in the call's allocation
	reader    bytes.Reader     // the forwarded body's reader, in the call's allocation
}

// attempt is the call as the audit's attempt list.
func (c *passCall) attempt() []audit.Attempt {
	// violations: [] as on contract attempts (the audit line has a list, not null).
	c.attempts[0] = audit.Attempt{Attempt: 1, UpstreamStatus: c.status, LatencyMS: ms(time.Since(c.start)), Violations: []contracts.Violation{}}
	return c.attempts[:]
}

type passCallKey struct{}

func (c *passCall) Value(k any) any {
	if k == (passCallKey{}) {
		return c
	}
	return c.Context.Value(k)
}

func callOf(r *http.Request) *passCall {
	c, _ := r.Context().Value(passCallKey{}).(*passCall)
	return c
}

// passProxy is a ReverseProxy for passthrough routes with an ErrorLog of
// its own, whose complaints (e.g. a body copy cut short) go to the
// structured log of the exchange it serves, with the request id. The
// Server pools them: a call neither copies a proxy nor builds a logger.
type passProxy struct {
	httputil.ReverseProxy
	x *exchange // the exchange in flight; nil while pooled
}

func (p *passProxy) Write(b []byte) (int, error) {
	p.x.logger().Warn(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// getPassProxy is a pooled passProxy serving x; putPassProxy gives it back
// once its ServeHTTP returned (ReverseProxy logs only from within it).
func (s *Server) getPassProxy(x *exchange) *passProxy {
	p, _ := s.passProxies.Get().(*passProxy)
	if p == nil {
		p = &passProxy{ReverseProxy: *s.newPassProxy()}
		p.ErrorLog = log.New(p, "", 0)
	}
	p.x = x
	return p
}

func (s *Server) putPassProxy(p *passProxy) {
	p.x = nil
	s.passProxies.Put(p)
}

// newPassProxy is the ReverseProxy passthrough routes forward with.
func (s *Server) newPassProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport: passTransport{s},
		// No periodic flush: a reply of known length goes out in as few
		// writes as net/http can make. ReverseProxy itself flushes after
		// every read for text/event-stream and for replies of unknown
		// length, so each SSE event is still relayed at once.
		FlushInterval:  0,
		BufferPool:     copyBuffers,
		Rewrite:        passRewrite,
		ModifyResponse: passModifyResponse,
		ErrorHandler:   passError,
	}
}

// passTransport is the Caller's transport as it is at call time (tests
// and embedders may replace the Caller's client after NewServer).
type passTransport struct{ s *Server }

func (t passTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.s.Caller.transport().RoundTrip(r)
}

func passRewrite(pr *httputil.ProxyRequest) {
	c := callOf(pr.In)
	*pr.Out.URL = *c.target // pr.Out's URL is its own copy
	pr.Out.Host = ""
	// io.NopCloser over a *bytes.Reader is a body net/http knows is in
	// memory: it writes the request line, headers and body in one write.
	// Any other type makes it flush the headers first, a second syscall.
	c.reader.Reset(c.body)
	pr.Out.Body = io.NopCloser(&c.reader)
	pr.Out.ContentLength = int64(len(c.body))
	// The transport writes Content-Length from ContentLength and never
	// from the header; drop the client's, which counted its own body.
	// (Canonical names: the map itself, without Del's canonicalizing.)
	h := pr.Out.Header
	delete(h, "Content-Length")
	delete(h, "Authorization")
	if key := c.s.Caller.Keys(c.route.Upstream); key != "" {
		h["Authorization"] = []string{"Bearer " + key}
	}
}

func passModifyResponse(resp *http.Response) error {
	c := callOf(resp.Request)
	c.timer.Stop()
	c.status = resp.StatusCode
	// Without a Content-Length header the reply completes only when
	// the handler returns, i.e. after the audit event is written
	// (audit before the response completes): net/http then sends a
	// short reply with the length it counted, a longer one chunked.
	// resp.ContentLength stays, so ReverseProxy knows the reply is
	// not a stream and does not flush it read by read.
	delete(resp.Header, "Content-Length")
	// The response already carries contractd's X-Request-Id (set in
	// chat); ReverseProxy adds the upstream's headers to it, so drop
	// the upstream's own id rather than send two.
	delete(resp.Header, "X-Request-Id")
	if relayedStream(resp) {
		// Whole events only, and a well-formed end if the stream breaks
		// (sserelay.go); the length may change.
		resp.ContentLength = -1
		resp.Body = newSSERelay(resp.Body, c)
		return nil
	}
	if resp.StatusCode >= 400 {
		// An error body may echo what the upstream was sent: the
		// key, as contract routes' 502 messages redact.
		resp.ContentLength = -1 // redacting changes the length
		return redactBody(resp, c.s.Caller.Keys(c.route.Upstream), bearerToken(c.in))
	}
	return nil
}

func passError(w http.ResponseWriter, r *http.Request, err error) {
	c := callOf(r)
	// r is the outgoing request, whose context also ends at the
	// upstream timeout, so ask the client's own context whether the
	// client left; the timeout must answer 504, not an empty 200.
	if c.clientCtx.Err() != nil {
		c.status = StatusClientClosed
		return // client gone: nothing to write
	}
	if errors.Is(err, context.DeadlineExceeded) || r.Context().Err() != nil {
		c.failed = &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout, Message: "upstream did not answer in time"}
	} else {
		c.failed = &APIError{Status: http.StatusBadGateway, Type: typeUpstream, Code: CodeUpstreamError, Message: "upstream " + quoteForMessage(c.route.Upstream.Name) + " failed: connection failed", Internal: err}
	}
	writeError(w, c.failed)
}

// withModel is body with its top-level model member set to model: the
// value replaced in place when there is one (everything else stays byte
// for byte, whitespace included), else the member added last.
func withModel(body []byte, obj object, model []byte) []byte {
	if v, ok := obj.get("model"); ok {
		if off, ok := offsetIn(body, v); ok {
			out := make([]byte, 0, len(body)-len(v)+len(model))
			out = append(out, body[:off]...)
			out = append(out, model...)
			return append(out, body[off+len(v):]...)
		}
	}
	return obj.apply([]edit{{Name: "model", Value: model}})
}

// offsetIn is where v starts in b, when v is a slice of b (parseObject's
// values alias the body).
func offsetIn(b, v []byte) (int, bool) {
	if len(v) == 0 || len(b) == 0 {
		return 0, false
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	return off, off >= 0 && off+len(v) <= len(b)
}

// passthrough forwards the request untouched but for model and
// Authorization, relaying the reply (SSE flushed per event). A client
// disconnect cancels the upstream call through the request context;
// cancel ends ctx, which the upstream's header timeout calls.
func (s *Server) passthrough(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, r *http.Request, x *exchange, route *config.Route, obj object) {
	plan := x.st.pass[passKey{route, x.edge}]
	body := withModel(x.body, obj, plan.model)
	if !audit.Discards(s.Audit) { // sink none: no line shows the hash or the input
		x.ev.InputSHA256 = sha(body)
		if x.st.rt.Audit.IncludeContent {
			x.ev.Input = body // the forwarded request; a relayed stream is not captured
		}
	}
	if plan.target == nil {
		x.fail(ctx, w, &APIError{Status: http.StatusBadGateway, Type: typeUpstream, Code: CodeUpstreamError, Message: "bad upstream URL"}, audit.OutcomeUpstreamError)
		return
	}
	c := &passCall{Context: ctx, s: s, x: x, route: route, target: plan.target, body: body, clientCtx: r.Context(), in: r, start: time.Now()}
	// ReverseProxy aborts the handler with panic(http.ErrAbortHandler) when
	// copying the body fails after the headers went out (client gone, or
	// the upstream stream broke). Record the request before re-panicking:
	// every chat request is audited. Any other panic is a fault, which the
	// exchange's recoverPanic records; it is told whether the relay may
	// have begun the response (the upstream answered, or passError wrote).
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				if c.timer != nil { // the call had begun: the relay's attempt
					x.ev.Attempts = c.attempt()
				}
				x.responding = c.status != 0 || c.failed != nil
				panic(p)
			}
			x.ev.Attempts = c.attempt()
			if c.clientCtx.Err() != nil {
				x.finish(ctx, StatusClientClosed, audit.OutcomeRejected, CodeClientClosed)
			} else { // the upstream stream broke or timed out mid-way
				code := CodeUpstreamError
				if c.broken != nil {
					code = c.broken.Code
				}
				x.finish(ctx, c.status, audit.OutcomeUpstreamError, code)
			}
			panic(p)
		}
	}()
	// max_concurrency caps every call to the upstream, passthrough too.
	release, err := s.Caller.sem.acquire(ctx, route.Upstream)
	if err != nil {
		// Its latency is the time waited (c.start is before the wait), as
		// a contract route's queued call counts it; no status: no call.
		x.ev.Attempts = c.attempt()
		x.fail(ctx, w, &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout,
			Message: "upstream " + quoteForMessage(route.Upstream.Name) + " is at max_concurrency and no slot freed in time"}, audit.OutcomeUpstreamError)
		return
	}
	defer release()
	// The upstream timeout bounds the wait for response headers only: a
	// healthy stream may run longer, bounded by request_timeout (ctx). The
	// timer starts once a max_concurrency slot is held, as on contract
	// routes: queueing counts against request_timeout, not the call.
	c.timer = time.AfterFunc(route.Upstream.Timeout, cancel)
	defer c.timer.Stop()
	rp := s.getPassProxy(x)
	rp.ServeHTTP(w, r.WithContext(c))
	s.putPassProxy(rp) // not after a panic: that proxy is left to the GC
	x.ev.Attempts = c.attempt()
	switch {
	case c.failed != nil:
		x.ev.Attempts[0].UpstreamStatus = 0
		if c.failed.Internal != nil { // as fail logs a contract route's 5xx
			x.logger().Warn("request failed", "code", c.failed.Code, "cause", c.failed.Internal.Error())
		}
		x.finish(ctx, c.failed.Status, audit.OutcomeUpstreamError, c.failed.Code)
	case c.broken != nil: // the stream ended with an error event (sserelay.go)
		x.finish(ctx, c.status, audit.OutcomeUpstreamError, c.broken.Code)
	case c.status == StatusClientClosed:
		x.ev.Attempts[0].UpstreamStatus = 0
		x.finish(ctx, c.status, audit.OutcomeRejected, CodeClientClosed)
	default:
		x.finish(ctx, c.status, audit.OutcomePassthrough, "")
	}
}

// maxErrorBody bounds what is relayed of an upstream error body; the rest
// is dropped (error bodies are short; this is not the reply budget).
const maxErrorBody = 1 << 20

// redactBody replaces resp's body by its redacted text: each key given and
// anything shaped like a key become [redacted]. A gzip body is decoded
// first (the client's Accept-Encoding is forwarded); a body in another
// encoding cannot be scanned and is withheld.
func redactBody(resp *http.Response, keys ...string) error {
	defer resp.Body.Close()
	var src io.Reader = resp.Body
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			src = strings.NewReader("")
			break
		}
		defer zr.Close()
		src = zr
	default:
		src = bytes.NewReader(mustJSON(errorBody{Error: errorObject{Type: typeUpstream, Code: CodeUpstreamError,
			Message: "upstream error body withheld: it could not be checked for secrets (Content-Encoding " + enc + ")"}}))
		resp.Header.Set("Content-Type", "application/json")
	}
	// A key across the read limit would be cut before the redaction could
	// match it: read on by the longest key, redact, then drop as many
	// bytes from the end of a cut body, which takes any such piece along.
	slack := 0
	for _, k := range keys {
		slack = max(slack, len(k))
	}
	limit := maxErrorBody + slack
	b, err := io.ReadAll(io.LimitReader(src, int64(limit)+1))
	if err != nil && len(b) == 0 {
		return err
	}
	cut := len(b) > limit
	if cut {
		b = b[:limit]
	}
	msg := string(b)
	for _, k := range keys {
		msg = redact(msg, k)
	}
	if cut {
		msg = msg[:max(0, len(msg)-slack)]
	}
	resp.Header.Del("Content-Encoding")
	resp.Body = io.NopCloser(strings.NewReader(msg))
	return nil
}

// copyBuffers are ReverseProxy's 32 KiB copy buffers, reused across
// requests instead of allocated per reply (a channel: no allocation to
// put one back, unlike a sync.Pool of slices).
var copyBuffers bufferPool = make(chan []byte, 256)

type bufferPool chan []byte

func (p bufferPool) Get() []byte {
	select {
	case b := <-p:
		return b
	default:
		return make([]byte, 32<<10)
	}
}

func (p bufferPool) Put(b []byte) {
	select {
	case p <- b:
	default:
	}
}
