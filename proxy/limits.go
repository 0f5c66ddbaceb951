package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// memory and connections are bounded by configuration. This file
// holds the pieces: the http.Server settings, per-request deadlines taken
// from the Runtime in force when the request arrived, the connection cap,
// and the in-flight byte budget request bodies and upstream replies share.

// DefaultWriteGrace is how long past request_timeout a response may take
// to be written: the 504 that request_timeout produces must still reach
// the client, and a slow reader gets this long to take a finished answer.
const DefaultWriteGrace = 30 * time.Second

// busyWait is how long a request waits for room in max_inflight_bytes
// before it is refused 503 server_busy.
const busyWait = time.Second

// NewHTTPServer returns the http.Server contractd serves h with. Only the
// header read and idle keep-alive are bounded here; body reads and writes
// get deadlines per request (Deadlines), from the Runtime of that request,
// so a reload that changes request_timeout or body_read_timeout applies to
// the next request. A server-wide ReadTimeout would also cut a long
// exchange short: once the body is read, net/http's background read of the
// connection fails at that deadline and cancels the request's context.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second, // slow-header clients
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
}

// Deadlines sets h's per-request deadlines from the Runtime in force when
// the request arrived: the body must arrive within body_read_timeout, the
// response be written within request_timeout plus WriteGrace. The chat
// and responses edges go through it too (Handler applies it); serve it
// around every other handler on a contractd listener (the admin one).
func (s *Server) Deadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.deadlines(w, r, time.Now())
		h.ServeHTTP(w, r)
	})
}

// deadlines sets r's body read and w's write deadlines, counted from now
// (the request's arrival as its handler reads it).
func (s *Server) deadlines(w http.ResponseWriter, r *http.Request, now time.Time) {
	srv := &s.state.Load().rt.Server
	cd := deadlinesOf(w)
	if cd == nil {
		return // as http.ResponseController: not supported
	}
	grace := s.WriteGrace
	if grace <= 0 {
		grace = DefaultWriteGrace
	}
	_ = cd.SetWriteDeadline(now.Add(srv.RequestTimeout + grace))
	if r.Body != nil && r.Body != http.NoBody {
		if cd.SetReadDeadline(now.Add(srv.BodyReadTimeout)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, cd: cd}
		}
	}
}

// connDeadlines sets a connection's deadlines: net/http's ResponseWriter
// (and testkit's) has both methods.
type connDeadlines interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// deadlinesOf is w, or the writer it wraps (Unwrap), that sets the
// connection's deadlines (nil: none does), found once for the request's
// three deadline calls instead of by http.ResponseController on each.
func deadlinesOf(w http.ResponseWriter) connDeadlines {
	for {
		switch t := w.(type) {
		case connDeadlines:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

// deadlineBody lifts the body's read deadline once the body has been read
// (or failed): past that point the connection is only watched for the
// client leaving, which must not fail at the body's deadline.
type deadlineBody struct {
	io.ReadCloser
	cd   connDeadlines
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	// Only a body read whole lifts it: after a timeout net/http still
	// drains what is left, which must stay bounded.
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.cd.SetReadDeadline(time.Time{})
	}
	return n, err
}

// ---------------------------------------------------------- connections

// ConnLimit caps the connections a listener has open at once
// (server.max_connections). At the cap, Accept holds the next client
// unserved until a connection closes, and further clients queue in the
// kernel's backlog rather than each costing a goroutine and buffers. A
// client waiting there does not wait for a keep-alive connection that sits
// idle between requests (up to the server's IdleTimeout, 2 minutes): the
// connection idle the longest is closed for it, as a proxy at its cap does
// (idle connections are known from the http.Server's ConnState: Track).
// Connections in the middle of a request, or that have not sent one yet
// (bounded by ReadHeaderTimeout), are never closed for it. The cap is read
// at each Accept, so reloads apply.
type ConnLimit struct {
	Max func() int
	// open counts the slots taken; conns counts the connections Accept
	// returned (the same, but for a slot taken and not yet handed out).
	open  atomic.Int64
	conns atomic.Int64
	mu    sync.Mutex
	free  chan struct{} // closed and replaced when a connection closes
	live  connList      // every open connection, under mu

	// idleSeq orders idle periods (a connection's idle mark is the value
	// when it went idle), so the oldest idle connection is found.
	idleSeq atomic.Int64
	// waiting is set while Accept holds a client at the cap; a connection
	// going idle then wakes it through idle.
	waiting atomic.Bool
	idle    chan struct{}
}

// Open is the number of connections open now (contractd_connections_open):
// a client held by Accept at the cap is not counted.
func (l *ConnLimit) Open() int64 { return l.conns.Load() }

// Listener wraps ln with the cap.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	l.mu.Lock()
	if l.idle == nil {
		l.idle = make(chan struct{}, 1)
	}
	l.mu.Unlock()
	return &limitListener{Listener: ln, l: l, closed: make(chan struct{})}
}

// Track makes hs report its connections' states to l (hs.ConnState, after
// any hook hs already has), so that at the cap an idle keep-alive
// connection gives its slot to a waiting client. hs must serve l's
// Listener; without Track, the cap waits for connections to close.
func (l *ConnLimit) Track(hs *http.Server) {
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		l.connState(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
}

// connState marks c idle between requests (StateIdle) and not idle once a
// request is read (StateActive) or the connection leaves net/http.
func (l *ConnLimit) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	if st != http.StateIdle {
		lc.idleSince.Store(0)
		return
	}
	lc.idleSince.Store(l.idleSeq.Add(1))
	if l.waiting.Load() {
		select {
		case l.idle <- struct{}{}:
		default:
		}
	}
}

type limitListener struct {
	net.Listener
	l      *ConnLimit
	once   sync.Once
	closed chan struct{}
}

func (ll *limitListener) Accept() (net.Conn, error) {
	l := ll.l
	// The client is accepted first and then given a slot: only a client
	// actually waiting makes an idle connection give up its slot.
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if l.free == nil {
			l.free = make(chan struct{})
		}
		if l.open.Load() < int64(max(l.Max(), 1)) {
			l.open.Add(1)
			lc := &limitConn{Conn: c, l: l}
			l.live.push(lc)
			l.mu.Unlock()
			l.conns.Add(1)
			return lc, nil
		}
		free := l.free
		l.waiting.Store(true) // before looking: a connection going idle after it wakes us
		victim := l.live.oldestIdle()
		l.mu.Unlock()
		if victim != nil {
			// Closing it frees its slot (free is closed); net/http's
			// goroutine for it sees the read fail and ends.
			_ = victim.Close()
		}
		select {
		case <-free:
		case <-l.idle:
		case <-ll.closed:
			l.waiting.Store(false)
			_ = c.Close()
			return nil, net.ErrClosed
		}
		l.waiting.Store(false)
	}
}

func (ll *limitListener) Close() error {
	ll.once.Do(func() { close(ll.closed) })
	return ll.Listener.Close()
}

func (l *ConnLimit) release(c *limitConn) {
	l.mu.Lock()
	l.live.remove(c)
	l.open.Add(-1)
	if l.free != nil {
		close(l.free)
		l.free = nil
	}
	l.mu.Unlock()
}

type limitConn struct {
	net.Conn
	l    *ConnLimit
	once sync.Once
	// idleSince is the ConnLimit's idleSeq when the connection went idle
	// between requests; 0 while it is not idle, -1 once chosen to close.
	idleSince  atomic.Int64
	prev, next *limitConn // ConnLimit.live, under its mu
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.conns.Add(-1)
		c.l.release(c)
	})
	return err
}

// connList is a ConnLimit's open connections, linked through them (no
// allocation per connection beyond the connection's own).
type connList struct{ head *limitConn }

func (cl *connList) push(c *limitConn) {
	c.next = cl.head
	if cl.head != nil {
		cl.head.prev = c
	}
	cl.head = c
}

func (cl *connList) remove(c *limitConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if cl.head == c {
		cl.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
}

// oldestIdle claims the connection idle the longest (nil: none is idle).
// A connection whose request began meanwhile is not claimed; one whose
// request's first bytes are arriving as it is closed is lost as it would
// be to the idle timeout (net/http's Shutdown closes idle connections
// alike).
func (cl *connList) oldestIdle() *limitConn {
	for {
		var best *limitConn
		var since int64
		for c := cl.head; c != nil; c = c.next {
			if s := c.idleSince.Load(); s > 0 && (best == nil || s < since) {
				best, since = c, s
			}
		}
		if best == nil || best.idleSince.CompareAndSwap(since, -1) {
			return best
		}
	}
}

// --------------------------------------------------------------- budget

// errBusy is a refusal by the in-flight budget: 503 server_busy.
var errBusy = errors.New("server busy: max_inflight_bytes held")

func busyError() *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: CodeServerBusy, RetryAfter: 1,
		Message: "the server is holding max_inflight_bytes of request and reply bodies; retry shortly"}
}

// budget is max_inflight_bytes: request bodies and upstream replies held at
// once. A hold that does not fit waits up to busyWait for releases, then
// is refused. A hold larger than the whole budget is let through when
// nothing else is held, so one body never waits forever. The last
// sixteenth of the budget is kept for small holds (up to smallHold): a
// flood of large slow uploads fills the rest and is refused there, while
// ordinary requests keep going.
const smallHold = 64 << 10

type budget struct {
	mu      sync.Mutex
	used    int64
	waiters int
	wake    chan struct{} // closed and replaced on release while someone waits
	refused atomic.Int64
	held    atomic.Int64
	holds   atomic.Int64 // holds granted so far: a cheap sign of activity
}

// acquire holds n bytes of limit, waiting up to busyWait (and never past
// ctx). It returns errBusy when no room came, or ctx's error.
func (b *budget) acquire(ctx context.Context, n, limit int64) error {
	if n <= 0 {
		return nil
	}
	if n > smallHold {
		limit -= limit / 16
	}
	var timer *time.Timer
	for {
		b.mu.Lock()
		if b.used+n <= limit || b.used == 0 {
			b.used += n
			b.held.Store(b.used)
			b.holds.Add(1)
			b.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.waiters++
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(busyWait)
		}
		var err error
		select {
		case <-wake:
		case <-timer.C:
			err = errBusy
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		b.waiters--
		b.mu.Unlock()
		if err != nil {
			if err == errBusy {
				b.refused.Add(1)
			}
			timer.Stop()
			return err
		}
	}
}

func (b *budget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.held.Store(b.used)
	if b.waiters > 0 && b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	b.mu.Unlock()
}

// LimitStats are the gauges and counter, read at each scrape.
type LimitStats struct {
	Connections   int64 // open on listen
	InflightBytes int64 // held in the budget
	RefusedBusy   int64 // 503 server_busy so far
	Holds         int64 // bodies and replies held so far (activity)
}

// LimitStats reads the limits' state for metrics.
func (s *Server) LimitStats() LimitStats {
	return LimitStats{Connections: s.Conns.Open(), InflightBytes: s.inflight.held.Load(), RefusedBusy: s.inflight.refused.Load(), Holds: s.inflight.holds.Load()}
}

// ------------------------------------------------------------ body pool

// Request bodies are read into pooled buffers of power-of-two classes,
// sized by Content-Length, so a body is read once, decoded in place, and
// its memory reused by the next request instead of left to the GC.
const (
	minClassShift = 12 // 4 KiB
	maxClassShift = 26 // 64 MiB; larger bodies are not pooled
)

var bodyPools [maxClassShift + 1]sync.Pool

func classOf(n int) int {
	c := minClassShift
	for (1 << c) < n {
		c++
	}
	return c
}

// getBuf returns a buffer of length 0 and capacity at least n, with the
// pool's holder of it (nil for a fresh buffer) for putBuf to reuse: a pool
// keeps pointers, and a new one for every Put was an allocation per body
// (two per contract request: its body and the upstream reply).
func getBuf(n int) ([]byte, *[]byte) {
	c := classOf(n)
	if c > maxClassShift {
		return make([]byte, 0, n), nil
	}
	if p, _ := bodyPools[c].Get().(*[]byte); p != nil {
		return (*p)[:0], p
	}
	return make([]byte, 0, 1<<c), nil
}

// putBuf returns b to its pool in holder p (from getBuf with b, or nil for
// a new one). Nothing may use b or p afterwards.
func putBuf(b []byte, p *[]byte) {
	c := cap(b)
	if c < 1<<minClassShift || c > 1<<maxClassShift || c&(c-1) != 0 {
		return
	}
	if p == nil {
		p = new([]byte)
	}
	*p = b[:0]
	bodyPools[classOf(c)].Put(p)
}

// body is a request body held in a pooled buffer and in the budget.
type body struct {
	buf  []byte
	hold *[]byte // buf's holder in its pool (getBuf), reused when buf goes back
	held int64
}

// readBody reads r's body once, into a pooled buffer sized by its
// Content-Length, holding its size in the in-flight budget. release gives
// both back.
func (s *Server) readBody(ctx context.Context, r *http.Request, limit, budgetLimit int64) (*body, *APIError) {
	b := &body{}
	if aerr := s.readBodyInto(ctx, b, r, limit, budgetLimit); aerr != nil {
		return nil, aerr
	}
	return b, nil
}

// readBodyInto is readBody into b, which the caller provides (an
// exchange's own, in its allocation).
func (s *Server) readBodyInto(ctx context.Context, b *body, r *http.Request, limit, budgetLimit int64) *APIError {
	// A function, not a value made up front: the error escapes, and
	// most requests never need it.
	tooLarge := func() *APIError {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: CodeRequestTooLarge,
			Message: "request body is larger than the server's max_body_bytes"}
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	err := s.inflight.readInto(ctx, b, r.Body, r.ContentLength, limit, budgetLimit)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errTooLarge):
		return tooLarge()
	case errors.Is(err, errBusy):
		return busyError()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Ended while waiting for room: the client left, or request_timeout.
		if r.Context().Err() != nil {
			return errClientClosed()
		}
		// request_timeout ran out: 504 upstream_timeout, as wherever else
		// the request's deadline passes.
		return &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout,
			Message: "request_timeout passed waiting for room in max_inflight_bytes"}
	}
	// A read error cancels the request's context in net/http whatever its
	// cause, so the error itself tells a timeout from a client that left.
	return bodyReadError(err)
}

var errTooLarge = errors.New("body larger than its limit")

// read reads rd whole into a pooled buffer, holding its size in the
// budget while it is held: size bytes at once when known (net/http and the
// transport stop a body at its Content-Length), else starting small and
// doubling, never past limit+1 bytes (one more than allowed tells
// errTooLarge). A buffer that cannot be held within busyWait is errBusy.
func (bg *budget) read(ctx context.Context, rd io.Reader, size, limit, budgetLimit int64) (*body, error) {
	b := &body{}
	if err := bg.readInto(ctx, b, rd, size, limit, budgetLimit); err != nil {
		return nil, err
	}
	return b, nil
}

// readInto is read into b, which holds nothing yet; on an error b holds
// nothing again.
func (bg *budget) readInto(ctx context.Context, b *body, rd io.Reader, size, limit, budgetLimit int64) error {
	hold := func(n int64) error {
		if err := bg.acquire(ctx, n-b.held, budgetLimit); err != nil {
			return err
		}
		b.held = n
		return nil
	}
	fail := func(err error) error {
		bg.drop(b)
		return err
	}
	if size >= 0 {
		if size > limit {
			return errTooLarge
		}
		if err := hold(size); err != nil {
			return err
		}
		b.buf, b.hold = getBuf(int(size))
		b.buf = b.buf[:size]
		_, err := io.ReadFull(rd, b.buf)
		if err == nil { // see the end (io.EOF at once): it lifts the read deadline
			var one [1]byte
			var n int
			n, err = rd.Read(one[:])
			if n > 0 {
				err = errTooLarge // more than announced: cannot come from net/http
			}
		}
		if err != io.EOF {
			return fail(err)
		}
		return nil
	}
	// Unknown size: start small and double, up to limit; at limit, one
	// more byte tells errTooLarge. The first hold is at most half the
	// budget: a budget under 32 KiB would otherwise refuse every chunked
	// (or gunzipped) upstream reply held beside its request's body.
	first := min(limit, 32<<10, max(budgetLimit/2, 1))
	if err := hold(first); err != nil {
		return err
	}
	b.buf, b.hold = getBuf(int(first))
	for {
		if len(b.buf) == cap(b.buf) || int64(len(b.buf)) == limit {
			if int64(len(b.buf)) >= limit {
				var one [1]byte
				n, err := rd.Read(one[:])
				if n > 0 {
					return fail(errTooLarge)
				}
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return fail(err)
				}
				continue
			}
			next := min(int64(cap(b.buf))*2, limit)
			if err := hold(next); err != nil {
				return fail(err)
			}
			nb, nh := getBuf(int(next))
			nb = append(nb, b.buf...)
			putBuf(b.buf, b.hold)
			b.buf, b.hold = nb, nh
		}
		end := min(cap(b.buf), int(limit))
		n, err := rd.Read(b.buf[len(b.buf):end])
		b.buf = b.buf[:len(b.buf)+n]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fail(err)
		}
	}
}

// drop gives a body's buffer and budget back. Nothing may use the body's
// bytes afterwards.
func (bg *budget) drop(b *body) {
	if b == nil {
		return
	}
	bg.release(b.held)
	b.held = 0
	putBuf(b.buf, b.hold)
	b.buf, b.hold = nil, nil
}

// release gives a request body's buffer and budget back.
func (s *Server) release(b *body) { s.inflight.drop(b) }
