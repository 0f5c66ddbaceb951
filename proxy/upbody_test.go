package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
)

const upbodyReply = `{"choices":[{"message":{"content":"{}"},"finish_reason":"stop"}]}`

// lateReader is a transport that answers at once and reads the request
// body only after RoundTrip has returned, as a transport may: the pooled
// body must still hold the bytes the attempt built then.
type lateReader struct {
	wg   sync.WaitGroup
	got  chan []byte
	read chan struct{} // closed: read the body now
}

func (t *lateReader) RoundTrip(r *http.Request) (*http.Response, error) {
	t.wg.Go(func() {
		<-t.read
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		t.got <- b
	})
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: int64(len(upbodyReply)), Body: io.NopCloser(strings.NewReader(upbodyReply)), Request: r}, nil
}

// TestUpstreamBodyOutlivesTheCall: the attempt lets go of its body when
// the call returns, before the transport read it; the buffer is not reused
// then (run with -race: a reuse would be a race and corrupt what the
// transport reads).
func TestUpstreamBodyOutlivesTheCall(t *testing.T) {
	tr := &lateReader{got: make(chan []byte, 1), read: make(chan struct{})}
	c := &Caller{Client: &http.Client{Transport: tr}, Keys: testKeys}
	u := &config.Upstream{Name: "u", BaseURL: "http://up.invalid/v1", Timeout: time.Second}
	body := newUpstreamBody()
	body.b = append(body.b, `{"model":"m","messages":[]}`...)
	if _, err := c.call(context.Background(), u, body, nil); err != nil {
		t.Fatal(err)
	}
	if body.done() {
		t.Fatal("the buffer went back to the pool before the transport read it")
	}
	// Other attempts take and fill pooled bodies meanwhile.
	for range 8 {
		o := newUpstreamBody()
		o.b = append(o.b, "overwritten"...)
		o.done()
	}
	close(tr.read)
	if got := <-tr.got; string(got) != `{"model":"m","messages":[]}` {
		t.Fatalf("the transport read %q", got)
	}
	tr.wg.Wait()
}

// syncTransport reads the request body within RoundTrip and reports the
// write through the request's httptrace (report false: it reports nothing).
type syncTransport struct {
	report bool
	err    error // the write's error it reports
	got    []byte
}

func (t *syncTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.got, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if tr := httptrace.ContextClientTrace(r.Context()); t.report && tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{Err: t.err})
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: int64(len(upbodyReply)), Body: io.NopCloser(strings.NewReader(upbodyReply)), Request: r}, nil
}

// TestUpstreamBodyReusedOnceWritten: the buffer goes back to the pool only
// when the transport reported its one reader written without error.
func TestUpstreamBodyReusedOnceWritten(t *testing.T) {
	want := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	u := &config.Upstream{Name: "u", BaseURL: "http://up.invalid/v1", Timeout: time.Second}
	for _, c := range []struct {
		name   string
		tr     *syncTransport
		pooled bool
	}{
		{"written", &syncTransport{report: true}, true},
		{"write failed", &syncTransport{report: true, err: errors.New("broken pipe")}, false},
		{"not reported", &syncTransport{}, false},
	} {
		caller := &Caller{Client: &http.Client{Transport: c.tr}, Keys: testKeys}
		body := newUpstreamBody()
		body.b = append(body.b, want...)
		if _, err := caller.call(context.Background(), u, body, nil); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(c.tr.got) != want {
			t.Errorf("%s: the transport read %q", c.name, c.tr.got)
		}
		if got := body.done(); got != c.pooled {
			t.Errorf("%s: back to the pool %v, want %v", c.name, got, c.pooled)
		}
	}
	// net/http's own transport reports the write: the upstream answers
	// only after a pause, so the report has come when the call returns.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(20 * time.Millisecond)
		if string(b) != want {
			http.Error(w, "body "+string(b), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, upbodyReply)
	}))
	defer srv.Close()
	caller := NewCaller(testKeys)
	defer caller.Client.CloseIdleConnections()
	body := newUpstreamBody()
	body.b = append(body.b, want...)
	if _, err := caller.call(context.Background(), &config.Upstream{Name: "u", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second}, body, nil); err != nil {
		t.Fatal(err)
	}
	if !body.done() {
		t.Error("net/http's transport: the buffer did not go back to the pool")
	}
}

// rewinder sends each request twice, the second time with a body from
// GetBody, as net/http's transport does when a reused connection broke
// before the request went out; the first answer is dropped.
type rewinder struct{ http.RoundTripper }

func (t rewinder) RoundTrip(r *http.Request) (*http.Response, error) {
	again := r.Clone(r.Context())
	resp, err := t.RoundTripper.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if again.Body, err = r.GetBody(); err != nil {
		return nil, err
	}
	return t.RoundTripper.RoundTrip(again)
}

// TestUpstreamBodyReadTwice: a transport's rewind reads the body again
// through GetBody, and an attempt's second call (after a 503) reads it
// through a reader of its own; both requests carry the same bytes, and the
// buffer is not reused (the first request's transport may still read it).
func TestUpstreamBodyReadTwice(t *testing.T) {
	busy := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
	}
	for _, c := range []struct {
		name string
		// first answers the first request instead of the reply.
		first      func(w http.ResponseWriter, r *http.Request)
		rewind     bool // through rewinder
		maxRetries int
		tries      int
	}{
		{"transport rewind", busy, true, 0, 1},
		{"transport retry", busy, false, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				n := len(bodies)
				mu.Unlock()
				if n == 1 {
					c.first(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, upbodyReply)
			}))
			defer srv.Close()
			caller := NewCaller(testKeys)
			caller.Backoff = time.Millisecond
			defer caller.Client.CloseIdleConnections()
			if c.rewind {
				caller.Client = &http.Client{Transport: rewinder{caller.Client.Transport}}
			}
			want := `{"model":"m","messages":[{"role":"user","content":"again"}]}`
			body := newUpstreamBody()
			body.b = append(body.b, want...)
			u := &config.Upstream{Name: "u", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second, MaxRetries: c.maxRetries}
			comp, err := caller.call(context.Background(), u, body, nil)
			if err != nil || comp.Output != "{}" || comp.Tries != c.tries {
				t.Fatalf("%v %+v", err, comp)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 2 || bodies[0] != want || bodies[1] != want {
				t.Fatalf("upstream read %q", bodies)
			}
			if body.done() {
				t.Error("the buffer went back to the pool after the body was read twice")
			}
		})
	}
}

// TestCallFollowsNoRedirect: a 3xx from the upstream is its answer, not a
// pointer to follow: the call fails with that status at once (not
// retried), and nothing reaches the location it names (a 301/302/303
// would have turned the POST into a bodiless GET, a 307/308 sent the
// prompt there again).
func TestCallFollowsNoRedirect(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		var calls, elsewhere atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if r.URL.Path != "/v1/chat/completions" {
				elsewhere.Add(1)
				_, _ = io.WriteString(w, upbodyReply)
				return
			}
			http.Redirect(w, r, "/v2/chat/completions", code)
		}))
		c := NewCaller(testKeys)
		u := &config.Upstream{Name: "u", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second, MaxRetries: 2}
		comp, err := c.Call(context.Background(), u, []byte(`{"model":"m"}`), nil)
		c.Client.CloseIdleConnections()
		srv.Close()
		var ue *UpstreamError
		if !errors.As(err, &ue) || ue.Status != code || ue.Timeout {
			t.Errorf("%d: call answered %+v, %v; want an UpstreamError with status %d", code, comp, err, code)
			continue
		}
		if n, e := calls.Load(), elsewhere.Load(); n != 1 || e != 0 {
			t.Errorf("%d: %d upstream calls, %d to the redirect's location; want 1 and 0", code, n, e)
		}
		if ae := ue.apiError("u"); ae.Status != http.StatusBadGateway || ae.Code != CodeUpstreamError {
			t.Errorf("%d: the client would get %d %s", code, ae.Status, ae.Code)
		}
	}
}

// TestCallFixedBody: Call's caller-owned bytes are sent as given and never
// pooled.
func TestCallFixedBody(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, upbodyReply)
	}))
	defer srv.Close()
	c := NewCaller(testKeys)
	defer c.Client.CloseIdleConnections()
	b := []byte(`{"model":"m"}`)
	if _, err := c.Call(context.Background(), &config.Upstream{Name: "u", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second}, b, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b) || string(b) != `{"model":"m"}` {
		t.Fatalf("sent %q, caller's bytes now %q", got, b)
	}
}

// Each upstream call of a contract route goes out in one write: request
// line, headers and body together, on both edges, for every attempt and
// for transport retries (net/http flushes the headers on their own, a
// second syscall, unless it knows the body is in memory).
func TestContractSendsEachCallInOneWrite(t *testing.T) {
	var calls, step atomic.Int32
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		calls.Add(1)
		body := string(c.Body)
		if strings.Contains(body, "retry-me") {
			switch step.Add(1) {
			case 1: // a transport retry: a second call of the attempt
				reply(w, 500, []byte(`{"error":{"message":"try again"}}`))
				return
			case 2: // and another: the attempt's third call
				reply(w, 503, []byte(`{"error":{"message":"try again"}}`))
				return
			}
		}
		if strings.Contains(body, "invalid-first") && c.Temperature() > 0 {
			reply(w, 200, completion(invalidAnswer, "stop", 10, 5))
			return
		}
		reply(w, 200, completion(validAnswer, "stop", 8, 4))
	}, cfg{})
	writes := countUpstreamWrites(t, h)
	long := strings.Repeat("a", 500)
	for _, c := range []struct {
		name, path, body string
		calls            int32
	}{
		{"chat", "", `{"model":"free","messages":[{"role":"user","content":"plain ` + long + `"}]}`, 1},
		{"responses", respPath, `{"model":"free","input":"plain ` + long + `"}`, 1},
		{"second attempt", "", `{"model":"free","messages":[{"role":"user","content":"invalid-first ` + long + `"}]}`, 2},
		{"two transport retries", "", `{"model":"free","messages":[{"role":"user","content":"retry-me ` + long + `"}]}`, 3},
		{"chat again", "", `{"model":"free","messages":[{"role":"user","content":"plain again ` + long + `"}]}`, 1},
	} {
		calls.Store(0)
		writes.Store(0)
		r := h.post(c.path, c.body)
		if r.Status != 200 {
			t.Fatalf("%s: status %d %s", c.name, r.Status, r.Body)
		}
		if n := calls.Load(); n != c.calls {
			t.Fatalf("%s: %d upstream calls, want %d", c.name, n, c.calls)
		}
		if n := writes.Load(); n != c.calls {
			t.Errorf("%s: %d writes to the upstream for %d calls, want one each", c.name, n, c.calls)
		}
	}
}
