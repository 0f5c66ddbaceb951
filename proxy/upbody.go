package proxy

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// upstreamBody is the body of one attempt's upstream calls, built in a
// pooled buffer. A transport may still read a request body after RoundTrip
// returns (it must only close it eventually), so the buffer goes back to
// the pool only once every reader handed to the transport is closed and the
// attempt has let go (done): counted in refs. A reader never closed only
// costs the buffer's reuse.
type upstreamBody struct {
	b       []byte
	pooled  bool
	refs    atomic.Int32
	first   bodyReader  // the first call's reader, so that it costs nothing
	used    atomic.Bool // first handed out
	getBody func() (io.ReadCloser, error)
}

// bodyReader is one reader of an upstreamBody's bytes.
type bodyReader struct {
	bytes.Reader
	u      *upstreamBody
	closed atomic.Bool
}

func (r *bodyReader) Close() error {
	if r.closed.CompareAndSwap(false, true) {
		r.u.unref()
	}
	return nil
}

// maxPooledBody: a rare huge body's buffer is not kept.
const maxPooledBody = 256 << 10

var upstreamBodyPool = sync.Pool{New: func() any {
	u := &upstreamBody{}
	u.getBody = func() (io.ReadCloser, error) { return u.reader(), nil }
	return u
}}

// newUpstreamBody returns a pooled body with an empty buffer, held once
// (by the attempt, until done).
func newUpstreamBody() *upstreamBody {
	u := upstreamBodyPool.Get().(*upstreamBody)
	u.pooled = true
	u.used.Store(false)
	u.refs.Store(1)
	return u
}

// fixedBody wraps bytes the caller owns: never pooled.
func fixedBody(b []byte) *upstreamBody {
	u := &upstreamBody{b: b}
	u.getBody = func() (io.ReadCloser, error) { return u.reader(), nil }
	u.refs.Store(1)
	return u
}

// reader returns a new reader of the bytes for the transport, which closes
// it. Readers are handed out only while the attempt holds the body (during
// Client.Do: GetBody for redirects and rewinds), so refs never returns to
// zero in between.
func (u *upstreamBody) reader() *bodyReader {
	u.refs.Add(1)
	r := &u.first
	if u.used.CompareAndSwap(false, true) {
		r.closed.Store(false)
	} else {
		r = &bodyReader{}
	}
	r.u = u
	r.Reset(u.b)
	return r
}

// done is the attempt letting go of the body.
func (u *upstreamBody) done() { u.unref() }

func (u *upstreamBody) unref() {
	if u.refs.Add(-1) != 0 || !u.pooled {
		return
	}
	if cap(u.b) > maxPooledBody {
		return
	}
	u.b = u.b[:0]
	u.first.Reset(nil)
	upstreamBodyPool.Put(u)
}
