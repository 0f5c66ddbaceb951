package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/h1"
	"github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// jsonHeaderValue is the Content-Type and Accept of every upstream call.
var jsonHeaderValue = []string{"application/json"}

// maxUpstreamBody bounds what we read of an upstream reply.
const maxUpstreamBody = 8 << 20

// maxErrorMessageBody bounds what is read of an upstream error reply (only
// its message is used).
const maxErrorMessageBody = 64 << 10

// UpstreamError is an upstream failure after transport retries. It is not a
// contract violation: the request is answered at once.
type UpstreamError struct {
	Status  int  // upstream HTTP status, 0 for transport failures
	Timeout bool // per-call timeout or request deadline
	Reason  string
	// Busy: the reply could not be held within max_inflight_bytes (503
	// server_busy, not retried).
	Busy bool
	// RetryAfter is the upstream's Retry-After on its last 429, passed on
	// to the client's 502 so it backs off as the provider asked;
	// HasRetryAfter tells a readable "0" (retry at once) from no header.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

func (e *UpstreamError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("upstream status %d: %s", e.Status, e.Reason)
	}
	return "upstream: " + e.Reason
}

// apiError turns an upstream failure into the client's 502/504.
func (e *UpstreamError) apiError(up string) *APIError {
	if e.Busy {
		ae := busyError()
		ae.Internal = e
		return ae
	}
	if e.Timeout {
		return &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout,
			Message: fmt.Sprintf("upstream %q did not answer in time", up), Internal: e}
	}
	msg := fmt.Sprintf("upstream %q failed: %s", up, e.Reason)
	if e.Status != 0 {
		msg = fmt.Sprintf("upstream %q answered HTTP %d: %s", up, e.Status, e.Reason)
	}
	ae := &APIError{Status: http.StatusBadGateway, Type: typeUpstream, Code: CodeUpstreamError, Message: msg, Internal: e}
	if e.Status == http.StatusTooManyRequests && e.HasRetryAfter {
		ae.RetryAfter = int((e.RetryAfter + time.Second - 1) / time.Second)
		ae.RetryAfterZero = ae.RetryAfter == 0
	}
	return ae
}

// Completion is an upstream chat completion we could read.
type Completion struct {
	Resp    openai.ChatCompletionResponse
	Status  int
	Tries   int // transport tries made (1 = no transport retry)
	Output  string
	Finish  string
	Refusal string
	// quoted is Output as the reply quoted it, when that is exactly what
	// jsonstr.Append writes for Output (the usual case): the answer sends
	// these bytes on instead of quoting the output again. Nil otherwise.
	// It is a slice of the reply's pooled buffer, kept out of its pool
	// (but not in the in-flight budget: its bytes were accounted while
	// the reply was read, as the strings copied from it never are) until
	// release.
	quoted []byte
	reply  *body // the buffer quoted points into; nil once released
	// choice holds Resp.Choices' one element: in the completion's own
	// allocation rather than a slice of its own.
	choice [1]openai.ChatCompletionChoice
}

// release gives the reply's buffer back to its pool once nothing reads
// c.quoted any more: the attempt was rejected, or its answer is written. A
// completion never released only leaves its buffer to the GC.
func (c *Completion) release() {
	if c == nil || c.reply == nil {
		return
	}
	c.quoted = nil
	putBuf(c.reply.buf, c.reply.hold)
	c.reply = nil
}

// Caller makes upstream calls. Safe for concurrent use; one per process so
// keep-alive connections are pooled across reloads.
type Caller struct {
	// Client holds the transport upstream calls go through (its
	// Transport; nil: http.DefaultTransport). Its own settings (redirects,
	// Jar, Timeout) are not used: see transport.
	Client *http.Client
	// Keys resolves an upstream's API key (from its api_key_env).
	Keys func(u *config.Upstream) string
	// Backoff is the base of the jittered exponential backoff.
	Backoff time.Duration
	sem     semaphores
	// replies is the in-flight budget a reply is held in while it is read
	// and decoded (the Server's, set by NewServer; nil: unbounded).
	replies     *budget
	repliesSize func() int64
}

// NewCaller returns a Caller with a pooled transport tuned for many
// concurrent calls to few hosts: internal/h1 for http:// upstreams, in
// front of net/http's Transport, which serves the rest (https, proxies).
func NewCaller(keys func(u *config.Upstream) string) *Caller {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = 0 // the per-call context bounds it
	return &Caller{Client: &http.Client{Transport: h1.New(t)}, Keys: keys, Backoff: 200 * time.Millisecond}
}

// Call POSTs a chat completion body to the upstream with transport retries
// (connect errors, per-call timeouts, 429, 5xx), honouring Retry-After,
// within ctx's deadline.
func (c *Caller) Call(ctx context.Context, u *config.Upstream, body []byte, hdr http.Header) (*Completion, error) {
	return c.call(ctx, u, fixedBody(body), hdr)
}

// call is Call with a body whose buffer may be pooled (upstreamBody).
func (c *Caller) call(ctx context.Context, u *config.Upstream, body *upstreamBody, hdr http.Header) (*Completion, error) {
	release, err := c.sem.acquire(ctx, u)
	if err != nil {
		return nil, &UpstreamError{Timeout: true, Reason: "request deadline passed waiting for an upstream slot"}
	}
	defer release()
	var last *UpstreamError
	for try := 1; ; try++ {
		comp, uerr, retryAfter := c.once(ctx, u, body, hdr)
		if uerr == nil {
			comp.Tries = try
			return comp, nil
		}
		last = uerr
		retryable := uerr.Timeout || uerr.Status == 0 || uerr.Status == 429 || uerr.Status >= 500
		if uerr.Status == statusBadReply { // a 200 that is not a chat completion: not retried
			uerr.Status = http.StatusOK
			retryable = false
		}
		if !retryable || try > u.MaxRetries || ctx.Err() != nil {
			break
		}
		wait := c.backoff(try, retryAfter)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			break // waiting would outlive the request
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &UpstreamError{Timeout: true, Reason: "request deadline passed during retry backoff"}
		case <-t.C:
		}
	}
	if ctx.Err() != nil {
		last.Timeout = true
	}
	return nil, last
}

// statusBadReply is UpstreamError.Status for a 200 reply contractd cannot
// use (not a chat completion, too large, no room in the in-flight budget):
// never retried, and reported with the upstream's 200.
const statusBadReply = -1

func (c *Caller) backoff(try int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, 30*time.Second)
	}
	base := c.Backoff << (try - 1)
	return base/2 + rand.N(base/2+1) // jitter: [base/2, base]
}

func (c *Caller) once(ctx context.Context, u *config.Upstream, body *upstreamBody, hdr http.Header) (*Completion, *UpstreamError, time.Duration) {
	cctx, cancel := context.WithTimeout(ctx, u.Timeout)
	defer cancel()
	// The request as http.NewRequestWithContext builds it, with the URL
	// the config parsed once (a copy of it: net/http may modify it).
	target, err := u.ChatURL()
	if err != nil {
		return nil, &UpstreamError{Reason: "bad upstream URL"}, 0
	}
	rctx, rc := context.Context(cctx), io.ReadCloser(nil)
	if len(body.b) > 0 {
		rctx, rc = body.request(cctx)
	}
	req := (&http.Request{Method: http.MethodPost, URL: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, len(hdr)+4), Host: target.Host}).WithContext(rctx)
	if rc != nil {
		req.Body, req.GetBody, req.ContentLength = rc, body.getBody, int64(len(body.b))
	}
	h := req.Header
	for k, v := range hdr {
		h[k] = v
	}
	// Canonical names set on the map itself, the JSON values shared (the
	// transport only reads them; a propagator's Set replaces a slice).
	h["Content-Type"] = jsonHeaderValue
	h["Accept"] = jsonHeaderValue
	if key := c.Keys(u); key != "" {
		h["Authorization"] = []string{"Bearer " + key}
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header)) // W3C traceparent: the attempt span
	resp, err := c.transport().RoundTrip(req)
	if err == nil && resp == nil {
		err = errNoResponse
	}
	if err != nil {
		return nil, transportError(err, cctx), 0
	}
	if resp.Body == nil { // a RoundTripper may answer a nil body for an empty one (http.Client allows it too)
		resp.Body = http.NoBody
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Only the message is used: a bounded read, outside the budget.
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorMessageBody))
		if err != nil {
			return nil, transportError(err, cctx), 0
		}
		ra, hasRA := retryAfter(resp.Header)
		return nil, &UpstreamError{Status: resp.StatusCode, Reason: upstreamMessage(data, resp.StatusCode, c.Keys(u)),
			RetryAfter: ra, HasRetryAfter: hasRA}, ra
	}
	// The reply is read once into a pooled buffer held in the in-flight
	// budget, decoded, and given back: the completion keeps copies of
	// the few strings it needs, and the buffer itself (out of the budget)
	// when the content's literal can be written on as it is
	// (Completion.quoted), instead of a copy of that literal.
	bg, limit := c.replies, int64(math.MaxInt64)
	if bg == nil {
		bg = &budget{}
	} else {
		limit = c.repliesSize()
	}
	b, err := bg.read(ctx, resp.Body, resp.ContentLength, maxUpstreamBody, limit)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, &UpstreamError{Status: statusBadReply, Reason: "reply body too large"}, 0
	case errors.Is(err, errBusy):
		return nil, &UpstreamError{Status: statusBadReply, Busy: true, Reason: "no room in max_inflight_bytes for the reply"}, 0
	case err != nil:
		return nil, transportError(err, cctx), 0
	}
	comp, ok := readCompletion(b.buf)
	if ok && comp.quoted != nil {
		bg.release(b.held)
		b.held = 0
		comp.reply = b
	} else {
		bg.drop(b)
	}
	if !ok {
		return nil, &UpstreamError{Status: statusBadReply, Reason: "reply is not a chat completion"}, 0
	}
	comp.Status = resp.StatusCode
	return comp, nil, 0
}

// transport is what upstream calls go through: the Client's transport,
// called directly. http.Client.Do would add only what an API upstream
// must not get: a redirect followed (a 301/302/303 turning the POST into
// a GET without its body, a 307/308 sending the prompt again wherever the
// reply points) and, for that, a copy of the request's headers on every
// call. A 3xx is the upstream's answer like any other non-200: reported as
// a 502 upstream_error, not retried, as passthrough routes relay it as
// they get it and the webhook does not follow one either.
func (c *Caller) transport() http.RoundTripper {
	if rt := c.Client.Transport; rt != nil {
		return rt
	}
	return http.DefaultTransport
}

// errNoResponse is a RoundTripper answering neither a response nor an
// error (a broken transport; http.Client reports the same).
var errNoResponse = errors.New("upstream transport returned no response and no error")

func transportError(err error, ctx context.Context) *UpstreamError {
	var ne net.Error
	if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
		return &UpstreamError{Timeout: true, Reason: "timed out"}
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return &UpstreamError{Reason: "cannot connect"}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &UpstreamError{Reason: "connection closed early"}
	}
	return &UpstreamError{Reason: "connection failed"}
}

// upstreamMessage extracts the upstream's error message for the client,
// redacted (key is the upstream's own) and then bounded: cut first, a key
// across the cut would lose the end that makes it match and keep the
// rest. It never includes request content or keys.
func upstreamMessage(data []byte, status int, key string) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		return truncate(redact(e.Error.Message, key), maxUpstreamMessage)
	}
	return strings.ToLower(http.StatusText(status))
}

// maxUpstreamMessage bounds the upstream message passed on (bytes, then
// "…").
const maxUpstreamMessage = 300

// secretLike matches bearer-token-shaped strings (sk-…, long opaque keys)
// that an upstream might echo back in an error.
var secretLike = regexp.MustCompile(`\b(sk|pk|rk|key)-[A-Za-z0-9_\-]{8,}`)

// redact removes the upstream's own key, and anything shaped like one,
// from a message that reaches clients and logs.
func redact(msg, key string) string {
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[redacted]")
	}
	return secretLike.ReplaceAllString(msg, "[redacted]")
}

// retryAfter reads a Retry-After header: the wait, and whether the header
// held one (delay-seconds or an HTTP-date; a date past is a wait of 0).
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
