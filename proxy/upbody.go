package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// upstreamBody is the body of one attempt's upstream calls, built in a
// pooled buffer.
//
// Every reader handed to net/http is io.NopCloser over a *bytes.Reader,
// a body net/http knows is in memory: the transport then writes the
// request line, headers and body in one write (any other type makes it
// flush the headers first, a second syscall per call).
//
// A transport may still read a request body after RoundTrip returns (the
// server answered before the body was written), and closing a NopCloser
// tells nothing. The buffer therefore goes back to the pool only when the
// transport has provably finished reading it: the attempt handed out a
// single reader (no second call, no GetBody for a transport retry) and the transport reported that reader's request written
// without error (httptrace WroteRequest, which net/http's HTTP/1 and
// HTTP/2 transports report after the body's last read, as internal/h1 does
// (its own request writer as Request.Write): a nil error means
// the body was read to its end, so no later try can reuse that reader
// without GetBody). Otherwise the buffer is left to the garbage collector,
// which frees it once the transport lets go.
type upstreamBody struct {
	b       []byte
	pooled  bool
	readers atomic.Int32 // readers handed out during this attempt
	wrote   atomic.Bool  // the first reader's request was written whole
	r       bytes.Reader // the first reader's state
	rc      io.ReadCloser
	// trace reports WroteRequest for the first reader's call. It is made
	// once and never written again: the transport may read its fields for
	// an old request after the body went back to the pool.
	trace   *httptrace.ClientTrace
	getBody func() (io.ReadCloser, error)
}

// maxPooledBody: a rare huge body's buffer is not kept.
const maxPooledBody = 256 << 10

var upstreamBodyPool = sync.Pool{New: func() any {
	u := &upstreamBody{}
	u.rc = io.NopCloser(&u.r)
	u.trace = &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			u.wrote.Store(true)
		}
	}}
	u.getBody = u.another
	return u
}}

// newUpstreamBody returns a pooled body with an empty buffer, held by the
// attempt until done.
func newUpstreamBody() *upstreamBody {
	u := upstreamBodyPool.Get().(*upstreamBody)
	u.pooled = true
	return u
}

// fixedBody wraps bytes the caller owns: never pooled.
func fixedBody(b []byte) *upstreamBody {
	u := &upstreamBody{b: b}
	u.getBody = u.another
	return u
}

// request returns the context and body of one upstream call. The
// attempt's first call gets the pooled reader and a context carrying the
// trace that reports its write (unless ctx already carries a trace, which
// WithClientTrace would compose into the pooled one: then nothing is
// reported and the buffer is not reused). Later calls get a fresh reader,
// and the buffer is not reused either.
func (u *upstreamBody) request(ctx context.Context) (context.Context, io.ReadCloser) {
	if u.readers.Add(1) == 1 && u.pooled && httptrace.ContextClientTrace(ctx) == nil {
		u.r.Reset(u.b)
		return httptrace.WithClientTrace(ctx, u.trace), u.rc
	}
	return ctx, io.NopCloser(bytes.NewReader(u.b))
}

// another is GetBody: a fresh reader of the same bytes, for the
// transport's own retry on a connection that broke before the request
// went out. It is called only during RoundTrip, while the attempt holds
// the body.
func (u *upstreamBody) another() (io.ReadCloser, error) {
	u.readers.Add(1)
	return io.NopCloser(bytes.NewReader(u.b)), nil
}

// done is the attempt letting go of the body once its calls returned. It
// reports whether the buffer went back to the pool.
func (u *upstreamBody) done() bool {
	if !u.pooled || cap(u.b) > maxPooledBody {
		return false
	}
	if n := u.readers.Load(); n > 1 || n == 1 && !u.wrote.Load() {
		return false // a transport may still read it
	}
	u.b = u.b[:0]
	u.r.Reset(nil)
	u.readers.Store(0)
	u.wrote.Store(false)
	upstreamBodyPool.Put(u)
	return true
}
