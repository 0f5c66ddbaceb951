// Package h1 is the HTTP/1.1 client transport for upstreams reached over
// plain HTTP (a model server or gateway on the same host or in the same
// cluster), where the cost of a hop is mostly the proxy's own CPU.
//
// net/http's Transport runs every exchange through two goroutines of the
// connection's (a write loop and a read loop) and hands the request and
// the response between them and the caller over channels, which wakes
// goroutines and threads on every call. Here the caller's goroutine writes
// the request and reads the response itself, with net/http's own writer
// (Request.Write) and parser (http.ReadResponse), each after a fast path
// for the common case; this package pools connections and decides when
// one may be used again, by the rules net/http's Transport follows.
// Everything else (https, which also negotiates HTTP/2; requests a proxy
// from the environment applies to; protocol upgrades; everything, when the
// fallback disables keep-alives, bounds the wait for a response header or
// caps connections per host) goes to the fallback transport unchanged.
//
// The reply's fast path (read.go) takes a reply whose head is already
// whole in the connection's buffer and simple: a final status, CRLF lines
// of plain ASCII, one Content-Length or no body. It builds the
// *http.Response http.ReadResponse would, from one string for the whole
// head instead of a string per line, key and value; anything else it
// leaves, unread, to http.ReadResponse.
//
// The request's fast path (write.go) takes a common request (no transfer
// coding or trailers, no body or one of a known length, a head that fits
// the connection's free write buffer) and writes it byte for byte as
// Request.Write would, its head in one append into that buffer instead of
// fmt and a sorter; anything else it leaves to Request.Write.
//
// What an upstream can see differ from net/http's Transport: no
// "Accept-Encoding: gzip" is added (replies come as the request asked,
// uncompressed unless it asked otherwise), and "Expect: 100-continue"
// does not hold the body back (it follows the headers at once, which
// RFC 9110 allows).
package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Transport is an http.RoundTripper that serves http:// requests itself
// and passes the rest to a fallback. Make one with New. It is safe for
// concurrent use.
type Transport struct {
	fallback *http.Transport
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	// off: the fallback sets what this transport does not implement
	// (keep-alives disabled, a response header timeout, a cap on
	// connections per host), so it serves everything.
	off bool

	maxIdle, maxIdlePerHost int
	idleTimeout             time.Duration // 0: no limit
	maxHeaderBytes          int64

	mu    sync.Mutex
	idle  map[string][]*conn // per host:port, the most recently used last
	nIdle int
	sweep *time.Timer // closes connections idle longer than idleTimeout
}

// New returns a Transport that takes its dialer, idle limits, response
// header limit and proxy function from fb, which serves every request this
// one does not.
func New(fb *http.Transport) *Transport {
	t := &Transport{
		fallback:       fb,
		maxIdle:        fb.MaxIdleConns,
		maxIdlePerHost: fb.MaxIdleConnsPerHost,
		idleTimeout:    fb.IdleConnTimeout,
		maxHeaderBytes: fb.MaxResponseHeaderBytes,
		idle:           map[string][]*conn{},
		dial:           fb.DialContext,
		off:            fb.DisableKeepAlives || fb.ResponseHeaderTimeout > 0 || fb.MaxConnsPerHost > 0,
	}
	if t.maxIdlePerHost <= 0 {
		t.maxIdlePerHost = http.DefaultMaxIdleConnsPerHost
	}
	if t.maxHeaderBytes <= 0 {
		t.maxHeaderBytes = 10 << 20 // net/http's default
	}
	if t.dial == nil {
		t.dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return t
}

// conn is one pooled connection. Only the goroutine that took it from the
// pool uses it, until it is put back or closed.
type conn struct {
	nc        net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	key       string
	reused    bool      // served an exchange before this one
	idleSince time.Time // when it was put back
	live      liveness
	// Read and Write counters: what decides whether a failed exchange
	// may be tried again on another connection.
	nread, nwritten int64
	readLimit       int64 // bytes Read may still return (the header limit)
}

func (c *conn) Read(p []byte) (int, error) {
	if c.readLimit <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > c.readLimit {
		p = p[:c.readLimit]
	}
	n, err := c.nc.Read(p)
	c.nread += int64(n)
	c.readLimit -= int64(n)
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.nc.Write(p)
	c.nwritten += int64(n)
	return n, err
}

var errHeaderTooLarge = errors.New("h1: upstream response headers too large")

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.serves(req) {
		return t.fallback.RoundTrip(req)
	}
	if err := check(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	key := hostPort(req)
	for {
		if err := ctx.Err(); err != nil {
			closeBody(req)
			return nil, err
		}
		pc, err := t.get(ctx, key)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := t.exchange(ctx, pc, req)
		if err == nil {
			return resp, nil
		}
		next, ok := retryable(pc, req, err)
		if !ok {
			return nil, err
		}
		req = next
	}
}

// serves reports whether RoundTrip handles req itself: plain HTTP to a
// host by its ASCII name or address, no proxy, no protocol upgrade, and a
// fallback without settings this transport does not have.
func (t *Transport) serves(req *http.Request) bool {
	if t.off || req.URL == nil || req.URL.Scheme != "http" || len(req.Header["Upgrade"]) > 0 {
		return false
	}
	for i := 0; i < len(req.URL.Host); i++ {
		if req.URL.Host[i] >= 0x80 {
			return false // an internationalised name: net/http converts it
		}
	}
	if t.fallback.Proxy != nil {
		if u, err := t.fallback.Proxy(req); u != nil || err != nil {
			return false
		}
	}
	return true
}

// check refuses what net/http's Transport refuses before writing a byte,
// so that nothing malformed reaches the wire.
func check(req *http.Request) error {
	switch {
	case req.URL.Host == "":
		return errors.New("http: no Host in request URL")
	case req.Header == nil:
		return errors.New("http: nil Request.Header")
	case req.Method != "" && !validMethod(req.Method):
		return fmt.Errorf("net/http: invalid method %q", req.Method)
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return true
}

func hostPort(req *http.Request) string {
	if req.URL.Port() != "" {
		return req.URL.Host
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// aLongTimeAgo is a deadline that has passed: setting it makes every
// blocked read and write on the connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req on pc and reads the response's header. On error pc
// is closed; on success the response's body owns pc.
func (t *Transport) exchange(ctx context.Context, pc *conn, req *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { pc.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		pc.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	pc.nread, pc.nwritten = 0, 0
	// writeRequest (as Request.Write) reports the trace's WroteRequest
	// itself, once the body is read, before the flush: as net/http's
	// Transport does.
	err := writeRequest(pc.bw, req)
	if err == nil {
		err = pc.bw.Flush()
	}
	if err != nil {
		if pc.nwritten == 0 {
			return fail(nothingWritten{err})
		}
		// The upstream may have answered before it stopped reading (a 413
		// for a body it will not take) and closed: that answer is already
		// here, and it is what net/http's Transport returns too.
		if ctx.Err() == nil {
			if resp, rerr := t.readResponse(pc, req, nil); rerr == nil {
				return t.withBody(ctx, pc, req, resp, stop, false), nil
			}
		}
		return fail(err)
	}
	resp, err := t.readResponse(pc, req, httptrace.ContextClientTrace(ctx))
	if err != nil {
		return fail(err)
	}
	return t.withBody(ctx, pc, req, resp, stop, true), nil
}

// withBody makes resp's body the owner of pc: given back to the pool at
// the body's end when reusable says so and the response allows it.
func (t *Transport) withBody(ctx context.Context, pc *conn, req *http.Request, resp *http.Response, stop func() bool, reusable bool) *http.Response {
	b := &body{rc: resp.Body, pc: pc, t: t, stop: stop, ctx: ctx,
		reuse: reusable && !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	if resp.Body == http.NoBody {
		b.finish(true) // nothing to read: the connection is free now
		return resp
	}
	resp.Body = b
	return resp
}

// readResponse reads the response to req under the header limit, which
// counts from the first byte read (the trace's GotFirstResponseByte peek
// included), passing over informational (1xx) responses as net/http's
// Transport does: reported to the trace's Got1xxResponse, their headers
// counted in the limit unless the trace saw them. trace may be nil.
func (t *Transport) readResponse(pc *conn, req *http.Request, trace *httptrace.ClientTrace) (*http.Response, error) {
	pc.readLimit = t.maxHeaderBytes
	defer func() { pc.readLimit = math.MaxInt64 }() // the body is not limited
	if trace != nil && trace.GotFirstResponseByte != nil {
		if b, err := pc.br.Peek(1); err == nil && len(b) == 1 {
			trace.GotFirstResponseByte()
		}
	}
	for {
		resp, ok, err := readSimple(pc.br, req)
		if !ok {
			resp, err = http.ReadResponse(pc.br, req)
		}
		if err != nil {
			if pc.readLimit <= 0 {
				return nil, fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", t.maxHeaderBytes)
			}
			return nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, err
			}
			pc.readLimit = t.maxHeaderBytes
		}
	}
}

// nothingWritten is a write that failed before any byte reached the
// connection: the upstream cannot have seen the request.
type nothingWritten struct{ error }

func (e nothingWritten) Unwrap() error { return e.error }

// retryable reports whether a failed exchange on pc may be tried again on
// another connection, and with which request (its body rewound), by
// net/http's Transport's rule: only after a connection that served an
// earlier exchange failed (the upstream may have closed it while idle),
// and only if the upstream cannot have seen the request or the request
// may be replayed and no byte of a response came.
func retryable(pc *conn, req *http.Request, err error) (*http.Request, bool) {
	if !pc.reused || req.Context().Err() != nil {
		return nil, false
	}
	var nw nothingWritten
	switch {
	case errors.As(err, &nw):
	case pc.nread == 0 && replayable(req):
	default:
		return nil, false
	}
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, gerr := req.GetBody()
	if gerr != nil {
		return nil, false
	}
	next := *req
	next.Body = body
	return &next, true
}

// replayable is net/http's rule: an idempotent method without a body (or
// with one it can get again), or a request carrying an idempotency key.
func replayable(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		switch req.Method {
		case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
			return true
		}
		if _, ok := req.Header["Idempotency-Key"]; ok {
			return true
		}
		if _, ok := req.Header["X-Idempotency-Key"]; ok {
			return true
		}
	}
	return false
}

// get takes the most recently used idle connection to key that is still
// open, or dials one.
func (t *Transport) get(ctx context.Context, key string) (*conn, error) {
	for {
		t.mu.Lock()
		l := t.idle[key]
		if len(l) == 0 {
			t.mu.Unlock()
			break
		}
		pc := l[len(l)-1]
		l[len(l)-1] = nil
		t.idle[key] = l[:len(l)-1]
		t.nIdle--
		t.mu.Unlock()
		if (t.idleTimeout <= 0 || time.Since(pc.idleSince) < t.idleTimeout) && pc.live.alive() {
			pc.reused = true
			return pc, nil
		}
		pc.nc.Close()
	}
	nc, err := t.dial(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	pc := &conn{nc: nc, key: key, readLimit: math.MaxInt64}
	pc.br = bufio.NewReaderSize(pc, bufSize)
	pc.bw = bufio.NewWriterSize(pc, bufSize)
	pc.live = newLiveness(nc)
	return pc, nil
}

// bufSize is the size of a connection's read and write buffers: a reply
// head (and most replies whole) fits in one read.
const bufSize = 4 << 10

// put gives pc back to the pool, or closes it when the pool is full.
func (t *Transport) put(pc *conn) {
	pc.idleSince = time.Now()
	t.mu.Lock()
	l := t.idle[pc.key]
	if len(l) >= t.maxIdlePerHost || (t.maxIdle > 0 && t.nIdle >= t.maxIdle) {
		t.mu.Unlock()
		pc.nc.Close()
		return
	}
	t.idle[pc.key] = append(l, pc)
	t.nIdle++
	if t.idleTimeout > 0 && t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout, t.sweepIdle)
	}
	t.mu.Unlock()
}

// sweepIdle closes the connections idle longer than idleTimeout, so that
// a pool nobody uses any more does not hold sockets the upstream closed.
func (t *Transport) sweepIdle() {
	now := time.Now()
	var old []*conn
	next := time.Duration(0)
	t.mu.Lock()
	for key, l := range t.idle {
		n := 0 // l is oldest first: put appends
		for n < len(l) && now.Sub(l[n].idleSince) >= t.idleTimeout {
			n++
		}
		old = append(old, l[:n]...)
		clear(l[:n])
		l = l[n:]
		t.nIdle -= n
		if len(l) == 0 {
			delete(t.idle, key)
			continue
		}
		t.idle[key] = l
		if d := t.idleTimeout - now.Sub(l[0].idleSince); next == 0 || d < next {
			next = d
		}
	}
	t.sweep = nil
	if next > 0 {
		t.sweep = time.AfterFunc(next, t.sweepIdle)
	}
	t.mu.Unlock()
	for _, pc := range old {
		pc.nc.Close()
	}
}

// CloseIdleConnections closes every idle connection, this transport's and
// the fallback's.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.nIdle = map[string][]*conn{}, 0
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, l := range idle {
		for _, pc := range l {
			pc.nc.Close()
		}
	}
	t.fallback.CloseIdleConnections()
}

// body is a response body that gives its connection back to the pool
// when it is read to its end, and closes it when it is closed before.
type body struct {
	rc    io.ReadCloser // http.ReadResponse's body, reading pc.br
	pc    *conn
	t     *Transport
	stop  func() bool // unregisters the context's deadline setter
	ctx   context.Context
	reuse bool
	err   error       // what Read returned last (io.EOF at the end), for the next Read
	done  atomic.Bool // the connection was given back or closed
	shut  atomic.Bool // Close was called
}

var errClosedBody = errors.New("http: read on closed response body")

func (b *body) Read(p []byte) (int, error) {
	if b.shut.Load() {
		return 0, errClosedBody
	}
	if b.err != nil {
		return 0, b.err // the connection is no longer this body's
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.finish(false)
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
	}
	b.err = err
	return n, err
}

// Close closes the connection unless the body was read to its end, as
// net/http's Transport does: what is left of the body is not drained.
func (b *body) Close() error {
	b.shut.Store(true)
	b.finish(false)
	return nil
}

// finish gives the connection back when the body ended cleanly and
// nothing follows it: bytes already buffered past the response are ones
// nobody asked for (net/http's Transport closes such a connection too), and
// the liveness peek at the socket would not see them.
func (b *body) finish(atEOF bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.stop() && atEOF && b.reuse && b.pc.br.Buffered() == 0 {
		b.t.put(b.pc)
		return
	}
	b.pc.nc.Close()
}
