package testkit

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Call is one request a fake Upstream received.
type Call struct {
	N      int // 1-based, in the order calls were recorded
	Method string
	Path   string
	Header http.Header
	Body   []byte
	JSON   map[string]any  // Body decoded (nil when it is not a JSON object)
	Ctx    context.Context // the request's context (done when the caller gives up)
}

// Temperature is the temperature the call was made with (-1 when absent).
func (c *Call) Temperature() float64 {
	if t, ok := c.JSON["temperature"].(float64); ok {
		return t
	}
	return -1
}

// Messages returns the messages sent.
func (c *Call) Messages() []map[string]any {
	raw, _ := c.JSON["messages"].([]any)
	out := make([]map[string]any, len(raw))
	for i, m := range raw {
		out[i], _ = m.(map[string]any)
	}
	return out
}

// Handler scripts a fake Upstream's reply to one call; c is already
// recorded (and r.Body already read into c.Body).
type Handler func(w http.ResponseWriter, r *http.Request, c *Call)

// Upstream is a fake OpenAI-compatible upstream on a loopback httptest
// server. Every request is recorded, then answered by the Handler. It also
// counts hits, tracks peak concurrency and lets hung handlers return on
// Close.
type Upstream struct {
	srv      *httptest.Server
	handle   Handler
	quit     chan struct{} // closed by Close: hung handlers return
	once     sync.Once
	canceled chan struct{} // one value per hung call whose context ended
	quiet    atomic.Bool
	hits     atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64

	mu    sync.Mutex
	n     int // calls numbered so far (recorded or not)
	calls []*Call
}

// NewUpstream starts a fake upstream answering with h; it is closed when
// the test ends.
func NewUpstream(t testing.TB, h Handler) *Upstream {
	t.Helper()
	u := &Upstream{handle: h, quit: make(chan struct{}), canceled: make(chan struct{}, 1024)}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	cur := u.inflight.Add(1)
	defer u.inflight.Add(-1)
	for {
		p := u.peak.Load()
		if cur <= p || u.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	body, _ := io.ReadAll(r.Body)
	c := &Call{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Ctx: r.Context()}
	_ = json.Unmarshal(body, &c.JSON)
	u.mu.Lock()
	u.n++
	c.N = u.n
	if !u.quiet.Load() {
		u.calls = append(u.calls, c)
	}
	u.mu.Unlock()
	u.handle(w, r, c)
}

// URL is the upstream's base_url with the /v1 prefix.
func (u *Upstream) URL() string { return u.srv.URL + "/v1" }

// RootURL is the server's URL without any path.
func (u *Upstream) RootURL() string { return u.srv.URL }

// Calls returns the calls recorded so far, in order.
func (u *Upstream) Calls() []*Call {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*Call(nil), u.calls...)
}

// Hits is the number of requests that reached the upstream (counted on
// arrival, recorded or not).
func (u *Upstream) Hits() int { return int(u.hits.Load()) }

// Peak is the largest number of requests the upstream served at once.
func (u *Upstream) Peak() int64 { return u.peak.Load() }

// SetQuiet stops (or resumes) recording calls; hits are still counted.
// Benchmarks use it so the record does not grow with b.N.
func (u *Upstream) SetQuiet(q bool) { u.quiet.Store(q) }

// Done is closed when the upstream is closed.
func (u *Upstream) Done() <-chan struct{} { return u.quit }

// Close releases hung handlers, drops client connections and stops the
// server. It may be called more than once.
func (u *Upstream) Close() {
	u.once.Do(func() { close(u.quit) })
	u.srv.CloseClientConnections()
	u.srv.Close()
}

// Hang blocks until the caller gives up (noted for WaitCanceled) or the
// upstream is closed.
func (u *Upstream) Hang(r *http.Request) {
	select {
	case <-r.Context().Done():
		u.NoteCanceled()
	case <-u.quit:
	}
}

// NoteCanceled records that a call saw its context end (for handlers that
// wait on the context themselves).
func (u *Upstream) NoteCanceled() {
	select {
	case u.canceled <- struct{}{}:
	default:
	}
}

// WaitCanceled waits for n calls to have seen their context end.
func (u *Upstream) WaitCanceled(t testing.TB, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for i := 0; i < n; i++ {
		select {
		case <-u.canceled:
		case <-deadline:
			t.Fatalf("only %d of %d upstream requests were cancelled within %v", i, n, within)
		}
	}
}
