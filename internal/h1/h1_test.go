package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// newTransport is h1 over a fallback configured like proxy.NewCaller's.
func newTransport(t *testing.T, tune func(*http.Transport)) *Transport {
	t.Helper()
	fb := http.DefaultTransport.(*http.Transport).Clone()
	fb.MaxIdleConns, fb.MaxIdleConnsPerHost = 1024, 256
	if tune != nil {
		tune(fb)
	}
	tr := New(fb)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// countingServer is an httptest server that counts the connections it
// accepted and closed.
type countingServer struct {
	*httptest.Server
	opened, closed atomic.Int32
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func do(t *testing.T, tr http.RoundTripper, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	resp.Body.Close()
	return resp, string(b)
}

func post(t *testing.T, u, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestReusesOneConnection(t *testing.T) {
	t.Cleanup(testkit.LeakCheck(t)) // registered first: runs after the servers close
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(append([]byte("echo:"), b...))
	})
	tr := newTransport(t, nil)
	for i := range 20 {
		body := strings.Repeat("x", i*700) // up to past the 4 KiB write buffer
		resp, got := do(t, tr, post(t, s.URL+"/v1/chat/completions", body))
		if resp.StatusCode != 200 || got != "echo:"+body {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, got[:min(len(got), 40)])
		}
	}
	if n := s.opened.Load(); n != 1 {
		t.Fatalf("20 sequential requests opened %d connections, want 1", n)
	}
	tr.CloseIdleConnections()
}

func TestConnectionNotReused(t *testing.T) {
	cases := []struct {
		name  string
		h     http.HandlerFunc
		req   func(*http.Request)
		close bool // the body is closed before it is read
	}{
		{name: "body closed before its end", h: func(w http.ResponseWriter, r *http.Request) {
			w.Write(bytes.Repeat([]byte("y"), 64<<10))
		}, close: true},
		{name: "Connection: close from the server", h: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		}},
		{name: "request asks to close", h: func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("ok"))
		}, req: func(r *http.Request) { r.Close = true }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(testkit.LeakCheck(t)) // registered first: runs after the servers close
			s := newCountingServer(t, c.h)
			tr := newTransport(t, nil)
			for range 2 {
				req := post(t, s.URL, "hi")
				if c.req != nil {
					c.req(req)
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if !c.close {
					io.ReadAll(resp.Body)
				}
				resp.Body.Close()
			}
			if n := s.opened.Load(); n != 2 {
				t.Fatalf("opened %d connections, want 2 (none reused)", n)
			}
			tr.mu.Lock()
			idle := tr.nIdle
			tr.mu.Unlock()
			if idle != 0 {
				t.Fatalf("%d idle connections kept, want 0", idle)
			}
		})
	}
}

// An empty body (204, HEAD) frees the connection with the response.
func TestEmptyBodyFreesConnection(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	tr := newTransport(t, nil)
	for range 3 {
		resp, err := tr.RoundTrip(post(t, s.URL, "x"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Body != http.NoBody {
			t.Fatalf("body %T, want http.NoBody", resp.Body)
		}
		// not even closed: net/http's Transport frees it as well
	}
	if n := s.opened.Load(); n != 1 {
		t.Fatalf("opened %d connections, want 1", n)
	}
}

// rawServer accepts connections and runs serve on each; it counts them.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(i int, c net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			i := int(s.accepted.Add(1))
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				serve(i, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) (*http.Request, string, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(req.Body)
	return req, string(b), err
}

// An idle connection the upstream closed is noticed when it is taken from
// the pool (the liveness peek), so even a request that may not be
// replayed (a POST) goes out on a new one and succeeds.
func TestIdleConnectionClosedByUpstream(t *testing.T) {
	t.Cleanup(testkit.LeakCheck(t)) // registered first: runs after the servers close
	closed := make(chan struct{}, 4)
	s := newRawServer(t, func(i int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, _, err := readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if i == 1 {
			c.Close() // while the client holds it idle
			closed <- struct{}{}
			return
		}
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := newTransport(t, nil)
	do(t, tr, post(t, s.url(), "first"))
	<-closed
	waitFor(t, func() bool { // the FIN has reached the client's socket
		tr.mu.Lock()
		defer tr.mu.Unlock()
		l := tr.idle[s.ln.Addr().String()]
		return len(l) == 1 && !l[0].live.alive()
	})
	req := post(t, s.url(), "second")
	req.GetBody = nil // not replayable: the peek must catch it
	if resp, got := do(t, tr, req); resp.StatusCode != 200 || got != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, got)
	}
	if n := s.accepted.Load(); n != 2 {
		t.Fatalf("accepted %d connections, want 2", n)
	}
	tr.CloseIdleConnections()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !testkit.WaitFor(5*time.Second, 5*time.Millisecond, cond) {
		t.Fatal("condition not met in 5 s")
	}
}

// opaqueConn hides the socket, so the liveness peek cannot see it and the
// retry rule alone decides (as where the upstream closes a connection
// between the peek and the write).
type opaqueConn struct{ net.Conn }

// dialOpaque makes fb dial opaqueConns.
func dialOpaque(fb *http.Transport) {
	d := &net.Dialer{}
	fb.DialContext = func(ctx context.Context, n, a string) (net.Conn, error) {
		c, err := d.DialContext(ctx, n, a)
		if err != nil {
			return nil, err
		}
		return opaqueConn{c}, nil
	}
}

func TestRetryOnReusedConnection(t *testing.T) {
	cases := []struct {
		name   string
		req    func(u string) *http.Request
		retry  bool
		server string // the body the second connection's server must see
	}{
		{name: "GET is replayed", req: func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, u, nil)
			return r
		}, retry: true},
		{name: "POST with an idempotency key is replayed with its body", req: func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("the body"))
			r.Header.Set("Idempotency-Key", "k1")
			return r
		}, retry: true, server: "the body"},
		{name: "POST is not replayed", req: func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("the body"))
			return r
		}},
		{name: "POST without GetBody is not replayed", req: func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("the body"))
			r.Header.Set("Idempotency-Key", "k1")
			r.GetBody = nil
			return r
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(testkit.LeakCheck(t)) // registered first: runs after the servers close
			var got atomic.Value
			s := newRawServer(t, func(i int, conn net.Conn) {
				br := bufio.NewReader(conn)
				if i == 1 {
					if _, _, err := readRequest(br); err != nil {
						return
					}
					io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					// Read the second request, then close without a byte
					// of answer: a connection lost while idle.
					readRequest(br)
					return
				}
				_, body, err := readRequest(br)
				if err != nil {
					return
				}
				got.Store(body)
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nretry")
			})
			tr := newTransport(t, dialOpaque)
			do(t, tr, post(t, s.url(), "first"))
			resp, err := tr.RoundTrip(c.req(s.url()))
			if !c.retry {
				if err == nil {
					resp.Body.Close()
					t.Fatal("succeeded, want the error (not replayable)")
				}
				return
			}
			if err != nil {
				t.Fatalf("RoundTrip: %v, want a retry on a new connection", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "retry" || s.accepted.Load() != 2 {
				t.Fatalf("body %q from %d connections", b, s.accepted.Load())
			}
			if v, _ := got.Load().(string); v != c.server {
				t.Fatalf("the retry carried body %q, want %q", v, c.server)
			}
			tr.CloseIdleConnections()
		})
	}
}

// A request on a new connection is never retried, whatever the method.
func TestNoRetryOnNewConnection(t *testing.T) {
	s := newRawServer(t, func(i int, c net.Conn) {
		readRequest(bufio.NewReader(c))
	})
	tr := newTransport(t, nil)
	req, _ := http.NewRequest(http.MethodGet, s.url(), nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("succeeded without an answer")
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("accepted %d connections, want 1", n)
	}
}

func TestCancel(t *testing.T) {
	for _, where := range []string{"waiting for the header", "reading the body"} {
		t.Run(where, func(t *testing.T) {
			t.Cleanup(testkit.LeakCheck(t)) // registered first: runs after the servers close
			gone := make(chan struct{})
			s := newRawServer(t, func(i int, c net.Conn) {
				defer close(gone) // the cancel may also cut the request short
				if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
					return
				}
				if where == "reading the body" {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
				}
				c.Read(make([]byte, 1)) // until the client closes
			})
			tr := newTransport(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			req := post(t, s.url(), "x").WithContext(ctx)
			var resp *http.Response
			var err error
			if where == "waiting for the header" {
				req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
					WroteRequest: func(httptrace.WroteRequestInfo) { go cancel() }}))
				resp, err = tr.RoundTrip(req)
			} else {
				resp, err = tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 4)
				if _, err := io.ReadFull(resp.Body, buf); err != nil {
					t.Fatal(err)
				}
				cancel()
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the connection stayed open after the cancel")
			}
			if tr.nIdle != 0 {
				t.Fatal("a cancelled connection went back to the pool")
			}
		})
	}
}

func TestDeadline(t *testing.T) {
	s := newRawServer(t, func(i int, c net.Conn) {
		readRequest(bufio.NewReader(c))
		c.Read(make([]byte, 1))
	})
	tr := newTransport(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := tr.RoundTrip(post(t, s.url(), "x").WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want context.DeadlineExceeded", err)
	}
}

// WroteRequest is reported once, after the body's last read: what
// proxy's pooled upstream body relies on to reuse its buffer.
func TestWroteRequestAfterTheBody(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	tr := newTransport(t, nil)
	body := bytes.NewReader(bytes.Repeat([]byte("b"), 10<<10))
	var calls int
	var left int
	var werr error
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { calls++; left = body.Len(); werr = i.Err }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, io.NopCloser(body))
	req.ContentLength = int64(body.Len())
	if _, got := do(t, tr, req); len(got) != 10<<10 {
		t.Fatalf("echoed %d bytes", len(got))
	}
	if calls != 1 || left != 0 || werr != nil {
		t.Fatalf("WroteRequest called %d times, %d bytes left unread, error %v", calls, left, werr)
	}
}

func TestIdleTimeoutClosesConnections(t *testing.T) {
	t.Cleanup(testkit.LeakCheck(t)) // registered first: runs after the servers close
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	tr := newTransport(t, func(fb *http.Transport) { fb.IdleConnTimeout = 30 * time.Millisecond })
	do(t, tr, post(t, s.URL, "x"))
	waitFor(t, func() bool { return s.closed.Load() == 1 })
	tr.mu.Lock()
	idle, sweep := tr.nIdle, tr.sweep
	tr.mu.Unlock()
	if idle != 0 || sweep != nil {
		t.Fatalf("after the sweep: %d idle, timer armed %v", idle, sweep != nil)
	}
	do(t, tr, post(t, s.URL, "x")) // a new connection, and the timer again
	waitFor(t, func() bool { return s.closed.Load() == 2 })
}

func TestIdleLimitPerHost(t *testing.T) {
	t.Cleanup(testkit.LeakCheck(t)) // registered first: runs after the servers close
	const n = 5
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release
		w.Write([]byte("ok"))
	})
	tr := newTransport(t, func(fb *http.Transport) { fb.MaxIdleConnsPerHost = 2 })
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := tr.RoundTrip(post(t, s.URL, "x"))
			if err != nil {
				t.Error(err)
				return
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}()
	}
	arrived.Wait()
	close(release)
	wg.Wait()
	waitFor(t, func() bool { return s.closed.Load() == n-2 })
	if tr.nIdle != 2 {
		t.Fatalf("%d idle, want 2", tr.nIdle)
	}
	tr.CloseIdleConnections()
	waitFor(t, func() bool { return s.closed.Load() == n })
}

// What h1 does not serve goes to the fallback, which adds
// "Accept-Encoding: gzip" (h1 never does): that tells them apart.
func TestFallback(t *testing.T) {
	via := func(r *http.Request) string {
		if r.Header.Get("Accept-Encoding") == "gzip" {
			return "fallback"
		}
		return "h1"
	}
	plain := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, via(r)) })
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, via(r)) }))
	defer tlsSrv.Close()
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		io.WriteString(w, "proxy:"+via(r))
	}))
	defer proxy.Close()

	tr := newTransport(t, func(fb *http.Transport) {
		fb.TLSClientConfig = &tls.Config{RootCAs: tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
		pu, _ := url.Parse(proxy.URL)
		fb.Proxy = func(r *http.Request) (*url.URL, error) {
			if r.URL.Path == "/via-proxy" {
				return pu, nil
			}
			return nil, nil
		}
	})
	upgrade, _ := http.NewRequest(http.MethodGet, plain.URL, nil)
	upgrade.Header.Set("Upgrade", "websocket")
	upgrade.Header.Set("Connection", "Upgrade")
	cases := []struct {
		req  *http.Request
		want string
	}{
		{post(t, plain.URL, "x"), "h1"},
		{post(t, tlsSrv.URL, "x"), "fallback"},
		{post(t, plain.URL+"/via-proxy", "x"), "proxy:fallback"},
		{upgrade, "fallback"},
	}
	for _, c := range cases {
		if _, got := do(t, tr, c.req); got != c.want {
			t.Errorf("%s %s: served by %q, want %q", c.req.Method, c.req.URL, got, c.want)
		}
	}
}

// BenchmarkRoundTrip is one exchange over loopback, h1 against net/http's
// Transport configured alike.
func BenchmarkRoundTrip(b *testing.B) {
	reply := bytes.Repeat([]byte("r"), 1500)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(reply)
	}))
	defer s.Close()
	body := bytes.Repeat([]byte("q"), 3000)
	for _, tc := range []struct {
		name string
		rt   func() http.RoundTripper
	}{
		{"h1", func() http.RoundTripper {
			fb := http.DefaultTransport.(*http.Transport).Clone()
			fb.DisableCompression = true
			return New(fb)
		}},
		{"nethttp", func() http.RoundTripper {
			fb := http.DefaultTransport.(*http.Transport).Clone()
			fb.DisableCompression = true
			return fb
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rt := tc.rt()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, s.URL, bytes.NewReader(body))
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
		})
	}
}

// A body cut short keeps failing: a second Read must not look like the end.
func TestTruncatedBodyKeepsFailing(t *testing.T) {
	s := newRawServer(t, func(i int, c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
	})
	tr := newTransport(t, nil)
	resp, err := tr.RoundTrip(post(t, s.url(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("first read: %v, want io.ErrUnexpectedEOF", err)
	}
	if n, err := resp.Body.Read(make([]byte, 8)); n != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("second read: %d, %v, want the same error", n, err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 8)); !errors.Is(err, errClosedBody) {
		t.Fatalf("read after Close: %v", err)
	}
}

// An upstream that answers before it has read the whole body and then
// closes (a 413): the answer is returned, as net/http's Transport does,
// not the write's broken pipe.
func TestAnswerBeforeTheBodyIsRead(t *testing.T) {
	t.Cleanup(testkit.LeakCheck(t))
	s := newRawServer(t, func(i int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 8\r\n\r\ntoo big!")
		c.(*net.TCPConn).SetLinger(0) // an RST for the rest of the body
	})
	tr := newTransport(t, nil)
	resp, err := tr.RoundTrip(post(t, s.url(), strings.Repeat("z", 32<<20)))
	if err != nil {
		t.Fatalf("RoundTrip: %v, want the 413", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || string(b) != "too big!" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	if tr.nIdle != 0 {
		t.Fatal("the broken connection went back to the pool")
	}
}

// A fallback with a setting h1 does not implement serves everything, so
// the setting holds.
func TestFallbackSettingsTakeEverything(t *testing.T) {
	s := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") == "gzip" {
			io.WriteString(w, "fallback")
			return
		}
		io.WriteString(w, "h1")
	})
	for name, tune := range map[string]func(*http.Transport){
		"DisableKeepAlives":     func(fb *http.Transport) { fb.DisableKeepAlives = true },
		"ResponseHeaderTimeout": func(fb *http.Transport) { fb.ResponseHeaderTimeout = time.Minute },
		"MaxConnsPerHost":       func(fb *http.Transport) { fb.MaxConnsPerHost = 8 },
	} {
		if _, got := do(t, newTransport(t, tune), post(t, s.URL, "x")); got != "fallback" {
			t.Errorf("%s: served by %q, want the fallback", name, got)
		}
	}
}

// Many goroutines share the pool while the upstream ends connections in
// every way it may (Connection: close, a close right after a reply, a close
// while idle): every reply reaches the request it answers, and a request
// that may be replayed never fails.
func TestConcurrentRoundTripsShareThePool(t *testing.T) {
	t.Cleanup(testkit.LeakCheck(t))
	var served atomic.Int64
	s := newRawServer(t, func(i int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			n := served.Add(1)
			id := req.URL.Query().Get("id")
			switch n % 7 {
			case 0: // says so
				io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(id))+"\r\n\r\n"+id)
				return
			case 3: // does not say so
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(id))+"\r\n\r\n"+id)
				return
			case 5: // chunked
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+strconv.FormatInt(int64(len(id)), 16)+"\r\n"+id+"\r\n0\r\n\r\n")
			default:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(id))+"\r\n\r\n"+id)
			}
		}
	})
	for _, peek := range []bool{true, false} {
		t.Run(fmt.Sprintf("peek=%v", peek), func(t *testing.T) { roundTripsShareThePool(t, s, peek) })
	}
}

// roundTripsShareThePool runs the requests; without the peek, only the
// retry rule saves the requests sent on connections the upstream closed.
func roundTripsShareThePool(t *testing.T, s *rawServer, peek bool) {
	tr := newTransport(t, func(fb *http.Transport) {
		fb.MaxIdleConnsPerHost = 4
		if !peek {
			dialOpaque(fb)
		}
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				id := strconv.Itoa(g*1000 + i)
				req, _ := http.NewRequest(http.MethodGet, s.url()+"/?id="+id, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Errorf("request %s: %v", id, err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != id {
					t.Errorf("request %s: body %q, %v", id, b, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	tr.CloseIdleConnections()
}
