package h1_test

// Differential tests: the same request, answered by the same bytes from a
// raw TCP server, sent once through h1's Transport and once through a fresh
// net/http Transport, must come out the same: error or not, the response's
// status, headers, body, trailers, Close and ContentLength, the 1xx
// responses a trace saw, the bytes the server read, and whether the
// connection served a second request.
//
// Where the two legitimately differ the comparison says so (dtCompare):
//   - a 101 to a request that asked for no upgrade, with the Upgrade and
//     Connection: Upgrade headers: net/http hands the raw connection over
//     as the body, h1 reads the 101 as a response without a body (h1 sends
//     no Upgrade request itself: those go to the fallback).
//   - h1 adds no "Accept-Encoding: gzip": the net/http side runs with
//     DisableCompression, so the bytes on the wire agree.
//   - with "Expect: 100-continue" net/http holds the body back for
//     ExpectContinueTimeout, h1 never does: both run with the timeout at
//     0 (net/http then sends the body at once too).
//   - a negative MaxResponseHeaderBytes: net/http refuses every response,
//     h1 takes the default limit. Not a case.
//
// And net/http's own races the test steps around (dtDo): its read loop,
// a goroutine, is what notices that an idle connection has bytes nobody
// asked for, or that the server closed it after a keep-alive response, and
// a second request can take the connection before it does (then a POST,
// which is not retried, fails with EOF). h1 looks at the socket when it
// takes the connection, so it does not race; the test waits for the
// client to close the connection before the second request.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/h1"
)

// dtServer is a raw TCP server that answers every request it reads (head
// and body) with the same bytes, and records what it read.
//
// Other programs' clients on the machine may still dial a port one of
// their servers had and this one now has: a connection whose first
// request is not for the server's own path (random) is not counted.
type dtServer struct {
	ln         net.Listener
	path       string
	reply      []byte
	closeAfter bool          // end the connection after each reply
	early      bool          // answer after the head, close with the body unread
	eof        chan struct{} // a client closed its connection
	wg         sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	accepts int
	conns   []net.Conn
	perConn []*bytes.Buffer // every byte read, connections in accept order
}

func dtServe(t testing.TB, reply []byte, closeAfter, early bool) *dtServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dtServer{ln: ln, path: fmt.Sprintf("/v1/chat/%016x", rand.Uint64()), reply: reply, closeAfter: closeAfter, early: early, eof: make(chan struct{}, 64)}
	s.wg.Add(1)
	go s.loop()
	return s
}

func (s *dtServer) url() string { return "http://" + s.ln.Addr().String() + s.path }

func (s *dtServer) loop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.accepts++
		s.conns = append(s.conns, c)
		buf := &bytes.Buffer{}
		s.perConn = append(s.perConn, buf)
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c, buf)
	}
}

type dtRecorder struct {
	c   net.Conn
	s   *dtServer
	buf *bytes.Buffer
}

func (r dtRecorder) Read(p []byte) (int, error) {
	n, err := r.c.Read(p)
	r.s.mu.Lock()
	r.buf.Write(p[:n])
	r.s.mu.Unlock()
	return n, err
}

func (s *dtServer) handle(c net.Conn, buf *bytes.Buffer) {
	defer s.wg.Done()
	foreign := false
	defer func() {
		c.Close()
		if foreign {
			return
		}
		select {
		case s.eof <- struct{}{}:
		default:
		}
	}()
	br := bufio.NewReader(dtRecorder{c, s, buf})
	for first := true; ; first = false {
		req, err := http.ReadRequest(br)
		if first && (err == nil && req.URL.Path != s.path || err != nil && buf.Len() > 0) {
			foreign = true
			s.mu.Lock()
			s.accepts--
			buf.Reset()
			s.mu.Unlock()
			return
		}
		if err != nil {
			return
		}
		if s.early {
			// The client is still writing the body: the reply must be
			// in its receive buffer before the close (with the body
			// unread: a reset) breaks its write.
			c.Write(s.reply)
			time.Sleep(50 * time.Millisecond)
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		if _, err := c.Write(s.reply); err != nil {
			return
		}
		if s.closeAfter {
			// Half-close, then wait for the client's close unrecorded: a
			// request written on the dead connection before the client
			// noticed is timing, not behaviour.
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
			return
		}
	}
}

// stop closes the server and returns how many connections it accepted and
// the bytes it read.
func (s *dtServer) stop() (int, string) {
	s.mu.Lock()
	s.stopped = true
	s.ln.Close()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	var all bytes.Buffer
	for _, b := range s.perConn {
		all.Write(b.Bytes())
	}
	// The port and path differ from server to server.
	seen := strings.ReplaceAll(all.String(), s.ln.Addr().String(), "ADDR")
	return s.accepts, strings.ReplaceAll(seen, s.path, "/v1/chat")
}

// dtCase is one exchange: a request and the bytes the server answers it
// with, sent twice on one transport.
type dtCase struct {
	name           string
	method         string // "" is GET
	body           string // a request body ("" none)
	header         http.Header
	host           string // Request.Host
	reqClose       bool   // Request.Close
	reply          string
	closeAfter     bool  // the server closes the connection after its reply
	limit          int64 // MaxResponseHeaderBytes (0: the default)
	keepAlivesOff  bool  // DisableKeepAlives
	trace1xx       bool  // a trace with Got1xxResponse
	traceFirstByte bool  // a trace with GotFirstResponseByte
	refused        bool  // both must refuse before writing a byte
	unsolicited    bool  // bytes follow the response: let net/http notice them
	early          bool  // the server answers before the body, which it never reads
}

// dtResult is what a caller can see of one exchange.
type dtResult struct {
	Err              bool
	Status           int
	Proto            string
	Header           http.Header
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Body             string
	BodyErr          bool
	Trailer          http.Header
	Got1xx           []string
}

// dtRun is one transport's run of a case: both exchanges, the accepts and
// what the server read.
type dtRun struct {
	first, second dtResult
	errs          [2]string // error texts, not compared
	accepts       int
	seen          string
}

const (
	dtTimeout = 2 * time.Second        // an exchange's deadline
	dtSettle  = 150 * time.Millisecond // see dtDo
)

func dtExchange(rt http.RoundTripper, c dtCase, url string) (dtResult, string) {
	ctx, cancel := context.WithTimeout(context.Background(), dtTimeout)
	defer cancel()
	var r dtResult
	if c.trace1xx || c.traceFirstByte {
		tr := &httptrace.ClientTrace{}
		if c.trace1xx {
			tr.Got1xxResponse = func(code int, h textproto.MIMEHeader) error {
				r.Got1xx = append(r.Got1xx, fmt.Sprintf("%d %v", code, h))
				return nil
			}
		}
		if c.traceFirstByte {
			tr.GotFirstResponseByte = func() {}
		}
		ctx = httptrace.WithClientTrace(ctx, tr)
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, body)
	if err != nil {
		panic(err)
	}
	if c.method != "" {
		req.Method = c.method // NewRequest refuses an invalid one
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if c.host != "" {
		req.Host = c.host
	}
	req.Close = c.reqClose
	resp, err := rt.RoundTrip(req)
	if err != nil {
		r.Err = true
		return r, err.Error()
	}
	r.Status, r.Proto, r.Header = resp.StatusCode, resp.Proto, resp.Header
	r.ContentLength, r.TransferEncoding, r.Close = resp.ContentLength, resp.TransferEncoding, resp.Close
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.Body, r.BodyErr, r.Trailer = string(b), err != nil, resp.Trailer
	if err != nil {
		return r, err.Error()
	}
	return r, ""
}

// dtTransports makes the pair, configured alike.
func dtTransports(c dtCase) (ours http.RoundTripper, theirs *http.Transport, closeAll func()) {
	cfg := func() *http.Transport {
		return &http.Transport{
			DisableCompression:     true,
			MaxResponseHeaderBytes: c.limit,
			DisableKeepAlives:      c.keepAlivesOff,
		}
	}
	fb, std := cfg(), cfg()
	ot := h1.New(fb)
	return ot, std, func() { ot.CloseIdleConnections(); std.CloseIdleConnections() }
}

func dtDo(t testing.TB, rt http.RoundTripper, c dtCase) dtRun {
	t.Helper()
	s := dtServe(t, []byte(c.reply), c.closeAfter, c.early)
	var run dtRun
	run.first, run.errs[0] = dtExchange(rt, c, s.url())
	if c.unsolicited || c.closeAfter {
		// Give net/http's read loop the time to close a connection with
		// bytes nobody asked for or one the server closed: wait for the
		// client's close (h1, which finds out when it takes the
		// connection, waits the whole time where it kept one).
		select {
		case <-s.eof:
		case <-time.After(dtSettle):
		}
	}
	run.second, run.errs[1] = dtExchange(rt, c, s.url())
	run.accepts, run.seen = s.stop()
	return run
}

// dtCompare reports how the runs differ ("" when they agree), leaving out
// what may legitimately differ. With early, how much of the body the
// server read before it closed is timing.
func dtCompare(ours, theirs dtRun, early bool) string {
	var diffs []string
	for i, pair := range [2][2]dtResult{{ours.first, theirs.first}, {ours.second, theirs.second}} {
		a, b := pair[0], pair[1]
		if a.Status == http.StatusSwitchingProtocols && b.Status == http.StatusSwitchingProtocols {
			// net/http hands over the connection as the body; h1 has none.
			a.Body, b.Body, a.BodyErr, b.BodyErr = "", "", false, false
		}
		if !reflect.DeepEqual(a, b) {
			diffs = append(diffs, fmt.Sprintf("exchange %d:\n  h1:       %s (err %q)\n  net/http: %s (err %q)",
				i+1, dtShort(fmt.Sprintf("%+v", a)), ours.errs[i], dtShort(fmt.Sprintf("%+v", b)), theirs.errs[i]))
		}
	}
	if ours.accepts != theirs.accepts {
		diffs = append(diffs, fmt.Sprintf("connections accepted: h1 %d, net/http %d", ours.accepts, theirs.accepts))
	}
	if ours.seen != theirs.seen && !early {
		diffs = append(diffs, fmt.Sprintf("server read:\n  h1:       %s\n  net/http: %s",
			dtShort(fmt.Sprintf("%q", ours.seen)), dtShort(fmt.Sprintf("%q", theirs.seen))))
	}
	return strings.Join(diffs, "\n")
}

// dtShort keeps a failure's message readable when a case's header is long.
func dtShort(s string) string {
	if len(s) <= 400 {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes more)", s[:400], len(s)-400)
}

// dtAgree runs c through both transports and fails t where they differ.
func dtAgree(t testing.TB, c dtCase) (ours, theirs dtRun) {
	t.Helper()
	ot, std, closeAll := dtTransports(c)
	defer closeAll()
	ours = dtDo(t, ot, c)
	theirs = dtDo(t, std, c)
	if d := dtCompare(ours, theirs, c.early); d != "" {
		t.Errorf("h1 and net/http differ for reply %s:\n%s", dtShort(fmt.Sprintf("%q", c.reply)), d)
	}
	// A hang is a failure even where both hang: the server closes the
	// connection whenever the reply is incomplete (dtFrame).
	for _, run := range []dtRun{ours, theirs} {
		for _, e := range run.errs {
			if strings.Contains(e, context.DeadlineExceeded.Error()) {
				t.Errorf("an exchange hung for %v: %s", dtTimeout, e)
			}
		}
	}
	return ours, theirs
}

const (
	dtHints  = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
	dtOK     = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
	dtSmall  = 1024       // a small MaxResponseHeaderBytes
	dtLong   = "X-Long: " // a header line longer than dtSmall follows
	dtAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
)

func dtCases() []dtCase {
	long := dtLong + strings.Repeat("a", 2*dtSmall) + "\r\n"
	// Over the limit but under twice it: a limit counted from twice over
	// (once for a trace's peek, once for the head) lets it through.
	longish := dtLong + strings.Repeat("a", dtSmall/2) + "\r\n"
	flood := strings.Repeat(dtHints, 2*dtSmall/len(dtHints)+1)
	return []dtCase{
		{name: "content-length", reply: dtOK},
		{name: "content-length zero", reply: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{name: "chunked with trailers", reply: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n" +
			"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: abc\r\nX-Other: d\r\n\r\n"},
		{name: "chunked with extensions", reply: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\n\r\n"},
		{name: "http/1.0 close-delimited", reply: "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", closeAfter: true},
		{name: "http/1.0 keep-alive", reply: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "http/1.1 close-delimited", reply: "HTTP/1.1 200 OK\r\n\r\nuntil the end", closeAfter: true},
		{name: "connection close", reply: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello", closeAfter: true},
		{name: "connection close, server keeps it open", reply: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "request close", reqClose: true, reply: dtOK},
		{name: "request connection close header", header: http.Header{"Connection": {"close"}}, reply: dtOK},
		{name: "keep-alives disabled", keepAlivesOff: true, reply: dtOK},
		{name: "head with content-length", method: http.MethodHead, reply: "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"},
		{name: "204", reply: "HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n"},
		{name: "304", reply: "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"},
		{name: "304 with content-length", reply: "HTTP/1.1 304 Not Modified\r\nContent-Length: 20\r\n\r\n"},
		{name: "100 continue then 200", reply: "HTTP/1.1 100 Continue\r\n\r\n" + dtOK},
		{name: "100 continue then 200, post", method: http.MethodPost, body: `{"model":"m"}`, reply: "HTTP/1.1 100 Continue\r\n\r\n" + dtOK},
		{name: "103 then 200", reply: dtHints + dtOK},
		{name: "103 then 200, traced", trace1xx: true, reply: dtHints + dtHints + dtOK},
		{name: "1xx flood over the header limit", limit: dtSmall, reply: flood + dtOK},
		{name: "1xx flood over the header limit, traced", limit: dtSmall, trace1xx: true, reply: flood + dtOK},
		{name: "headers over the limit", limit: dtSmall, reply: "HTTP/1.1 200 OK\r\n" + long + "Content-Length: 2\r\n\r\nok"},
		{name: "headers over the limit, first byte traced", limit: dtSmall, traceFirstByte: true,
			reply: "HTTP/1.1 200 OK\r\n" + long + "Content-Length: 2\r\n\r\nok"},
		{name: "headers just over the limit, first byte traced", limit: dtSmall, traceFirstByte: true,
			reply: "HTTP/1.1 200 OK\r\n" + longish + longish + "Content-Length: 2\r\n\r\nok"},
		{name: "headers under the limit, long body", limit: dtSmall, reply: "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n" + strings.Repeat("b", 3000)},
		{name: "malformed status line", reply: "HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\nok"},
		{name: "not http", reply: "SSH-2.0-OpenSSH_9.6\r\n"},
		{name: "malformed header", reply: "HTTP/1.1 200 OK\r\nNo colon here\r\nContent-Length: 2\r\n\r\nok"},
		{name: "bad content-length", reply: "HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok"},
		{name: "two content-lengths", reply: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"},
		{name: "bad chunk size", reply: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", closeAfter: true},
		{name: "truncated body", reply: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", closeAfter: true},
		{name: "truncated chunked body", reply: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", closeAfter: true},
		{name: "truncated head", reply: "HTTP/1.1 200 OK\r\nContent-Le", closeAfter: true},
		{name: "closed before any byte", reply: "", closeAfter: true},
		{name: "101 without an upgrade asked", reply: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\nrest", closeAfter: true},
		{name: "post with body", method: http.MethodPost, body: `{"model":"m","messages":[]}`,
			header: http.Header{"Content-Type": {"application/json"}}, reply: dtAnswer},
		{name: "unsolicited bytes after the response", unsolicited: true, reply: dtAnswer + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"},
		{name: "unsolicited garbage after the response", unsolicited: true, reply: dtAnswer + "garbage"},
		{name: "413 before the body is read", method: http.MethodPost, body: strings.Repeat("x", 8<<20), early: true,
			reply: "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo long"},
		{name: "413 before the body is read, no connection close", method: http.MethodPost, body: strings.Repeat("x", 8<<20), early: true,
			reply: "HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\n\r\ntoo long"},
		{name: "invalid header name", refused: true, header: http.Header{"Bad Name": {"v"}}, reply: dtAnswer},
		{name: "header value with crlf", refused: true, header: http.Header{"X-Smuggle": {"a\r\nGET /admin HTTP/1.1"}}, reply: dtAnswer},
		{name: "header value with lf", refused: true, header: http.Header{"X-A": {"a\nb"}}, reply: dtAnswer},
		{name: "expect 100-continue", method: http.MethodPost, body: `{"model":"m"}`,
			header: http.Header{"Expect": {"100-continue"}}, reply: "HTTP/1.1 100 Continue\r\n\r\n" + dtAnswer},
		{name: "host with crlf (both cut it)", host: "a\r\nX-Smuggle: b", reply: dtAnswer},
		{name: "invalid method", refused: true, method: "GE T", reply: dtAnswer},
	}
}

func TestTransportAgrees(t *testing.T) {
	for _, c := range dtCases() {
		t.Run(c.name, func(t *testing.T) {
			ours, theirs := dtAgree(t, c)
			t.Logf("net/http: accepted %d; %s (err %q); %s (err %q)", theirs.accepts,
				dtShort(fmt.Sprintf("%+v", theirs.first)), theirs.errs[0], dtShort(fmt.Sprintf("%+v", theirs.second)), theirs.errs[1])
			if c.refused {
				for _, run := range []dtRun{ours, theirs} {
					if !run.first.Err || run.seen != "" || run.accepts != 0 {
						t.Errorf("not refused before writing: err %v, accepted %d, server read %q", run.first.Err, run.accepts, run.seen)
					}
				}
			}
		})
	}
}
