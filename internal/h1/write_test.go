package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// wtBody is a request body that counts its closes; net/http does not know
// it for one in memory, so Request.Write flushes the head before it.
type wtBody struct {
	r        *bytes.Reader
	failAt   int // a read past this many bytes fails (-1: never)
	closeErr bool
	closes   atomic.Int32
}

func (b *wtBody) Read(p []byte) (int, error) {
	if b.failAt >= 0 {
		read := int(b.r.Size()) - b.r.Len()
		if read >= b.failAt {
			return 0, errors.New("body read failed")
		}
		if len(p) > b.failAt-read {
			p = p[:b.failAt-read]
		}
	}
	return b.r.Read(p)
}

func (b *wtBody) Close() error {
	b.closes.Add(1)
	if b.closeErr {
		return errors.New("body close failed")
	}
	return nil
}

// wtWire records what reaches it and fails every write once failAfter
// bytes went through (failAfter < 0: never).
type wtWire struct {
	got       []byte
	failAfter int
	writes    int
}

func (w *wtWire) Write(p []byte) (int, error) {
	w.writes++
	if w.failAfter < 0 || len(w.got)+len(p) <= w.failAfter {
		w.got = append(w.got, p...)
		return len(p), nil
	}
	n := max(w.failAfter-len(w.got), 0)
	w.got = append(w.got, p[:n]...)
	return n, errors.New("wire broke")
}

// wtOutcome is what one write of a request did.
type wtOutcome struct {
	wire       string
	writes     int // to the wire: the same head and body split alike
	err        string
	wrote      []string // WroteRequest's errors, "" for nil
	closes     int32    // -1: a body that cannot count them
	fast       bool
	bufferLeft int
}

type wtRequest func(ctx context.Context) (*http.Request, *wtBody)

// wtWrite writes a request from mk on a fresh wire through a writer of
// size bufSize (after pre, flushed), with write (writeRequest or
// Request.Write).
func wtWrite(mk wtRequest, traced bool, bufSize, failAfter int, pre string, write func(*bufio.Writer, *http.Request) error) wtOutcome {
	var o wtOutcome
	ctx := context.Background()
	if traced {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
			s := ""
			if i.Err != nil {
				s = "error: " + i.Err.Error()
			}
			o.wrote = append(o.wrote, s)
		}})
	}
	req, body := mk(ctx)
	wire := &wtWire{failAfter: failAfter}
	bw := bufio.NewWriterSize(wire, bufSize)
	if pre != "" {
		bw.WriteString(pre)
		bw.Flush()
	}
	_, o.fast = fastHead(bw, req, httptrace.ContextClientTrace(req.Context()))
	if err := write(bw, req); err != nil {
		o.err = err.Error()
	}
	o.bufferLeft = bw.Buffered()
	bw.Flush()
	o.wire, o.writes = string(wire.got), wire.writes
	o.closes = -1
	if body != nil {
		o.closes = body.closes.Load()
	}
	return o
}

func requestWrite(w *bufio.Writer, req *http.Request) error { return req.Write(w) }

// wtAgree fails t unless writeRequest did with mk's request what
// Request.Write does, on a 4 KiB writer as the transport's; and, when
// fast, unless writeRequest took its own path.
func wtAgree(t *testing.T, mk wtRequest, fast bool) {
	t.Helper()
	ours := wtWrite(mk, true, 4<<10, -1, "", writeRequest)
	theirs := wtWrite(mk, true, 4<<10, -1, "", requestWrite)
	if ours.fast != fast {
		t.Errorf("fast path taken: %v, want %v", ours.fast, fast)
	}
	if d := wtDiff(ours, theirs); d != "" {
		t.Error(d)
	}
}

func wtDiff(ours, theirs wtOutcome) string {
	ours.fast, theirs.fast = false, false
	if fmt.Sprint(ours) == fmt.Sprint(theirs) {
		return ""
	}
	return fmt.Sprintf("writeRequest and Request.Write differ:\n ours:   %q\n theirs: %q", fmt.Sprint(ours), fmt.Sprint(theirs))
}

// contractRequest is the request proxy's Caller.once sends: built as
// there, its body an io.NopCloser over a *bytes.Reader, a trace with
// WroteRequest.
func contractRequest(body string, extra http.Header) wtRequest {
	return func(ctx context.Context) (*http.Request, *wtBody) {
		target, _ := url.Parse("http://127.0.0.1:18081/v1/chat/completions")
		req := (&http.Request{Method: http.MethodPost, URL: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: make(http.Header), Host: target.Host}).WithContext(ctx)
		b := []byte(body)
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		for k, v := range extra {
			req.Header[k] = v
		}
		json := []string{"application/json"}
		req.Header["Content-Type"] = json
		req.Header["Accept"] = json
		req.Header["Authorization"] = []string{"Bearer sk-upstream"}
		return req, nil
	}
}

// passRequest is the request httputil.ReverseProxy makes of in with a
// Rewrite as the passthrough's (the body in memory, Content-Length and
// Authorization replaced), optionally with X-Forwarded-For and the rest.
func passRequest(t *testing.T, in string, xff bool) wtRequest {
	t.Helper()
	var out *http.Request
	var body []byte
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "127.0.0.1:18081", ""
			b, _ := io.ReadAll(pr.In.Body)
			body = b
			pr.Out.Body, pr.Out.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			delete(pr.Out.Header, "Content-Length")
			pr.Out.Header["Authorization"] = []string{"Bearer sk-upstream"}
			if xff {
				pr.SetXForwarded()
			}
		},
		Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			out = r
			return nil, errors.New("captured")
		}),
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) {},
	}
	inReq, err := http.ReadRequest(bufio.NewReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	inReq.RemoteAddr = "127.0.0.1:40000"
	rp.ServeHTTP(httptest.NewRecorder(), inReq)
	if out == nil {
		t.Fatal("ReverseProxy made no request")
	}
	return func(ctx context.Context) (*http.Request, *wtBody) {
		// ReverseProxy's own trace (Got1xxResponse) composed with ctx's.
		r := out.WithContext(httptrace.WithClientTrace(ctx, httptrace.ContextClientTrace(out.Context())))
		r.Body = io.NopCloser(bytes.NewReader(body))
		return r, nil
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

const wtChat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Extract the invoice as JSON."}],"response_format":{"type":"json_schema","json_schema":{"name":"invoice","schema":{"type":"object"}}}}`

// The requests contractd sends upstream take writeRequest's own path and
// come out as Request.Write writes them.
func TestWriteRequestFastPath(t *testing.T) {
	client := "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: OpenAI/Python 1.54.3\r\n" +
		"Accept: application/json\r\nAccept-Encoding: gzip, deflate\r\nAuthorization: Bearer sk-client\r\n" +
		"Connection: keep-alive\r\nContent-Type: application/json\r\nX-Stainless-Lang: python\r\n" +
		"X-Stainless-Retry-Count: 0\r\nX-Request-Id: req-7\r\nContent-Length: " + fmt.Sprint(len(wtChat)) + "\r\n\r\n" + wtChat
	bare := "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost:8080\r\nContent-Length: " + fmt.Sprint(len(wtChat)) + "\r\n\r\n" + wtChat
	for _, tc := range []struct {
		name string
		mk   wtRequest
	}{
		{"contract route", contractRequest(wtChat, nil)},
		{"contract route, X-Request-Id and traceparent", contractRequest(wtChat, http.Header{
			"X-Request-Id": {"req-7", "req-8"},
			"Traceparent":  {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})},
		{"contract route, a body past the buffer", contractRequest(strings.Repeat("x", 9000), nil)},
		{"passthrough", passRequest(t, client, false)},
		{"passthrough with X-Forwarded-For", passRequest(t, client, true)},
		{"passthrough, no User-Agent", passRequest(t, bare, true)},
	} {
		t.Run(tc.name, func(t *testing.T) { wtAgree(t, tc.mk, true) })
	}
}

// Requests writeRequest leaves to Request.Write, and ones at the edges of
// what it takes.
func TestWriteRequestEdges(t *testing.T) {
	get := func(tune func(*http.Request), body io.ReadCloser) wtRequest {
		return func(ctx context.Context) (*http.Request, *wtBody) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://up.example:80/a%20b?q=1", nil)
			req.Body = body
			if tune != nil {
				tune(req)
			}
			return req, nil
		}
	}
	counted := func(method string, cl int64, body string, failAt int, closeErr bool) wtRequest {
		return func(ctx context.Context) (*http.Request, *wtBody) {
			b := &wtBody{r: bytes.NewReader([]byte(body)), failAt: failAt, closeErr: closeErr}
			req, _ := http.NewRequestWithContext(ctx, method, "http://up.example/", nil)
			req.Body, req.ContentLength = b, cl
			return req, b
		}
	}
	for _, tc := range []struct {
		name string
		mk   wtRequest
		fast bool
	}{
		{"GET", get(nil, nil), true},
		{"NoBody", get(nil, http.NoBody), true},
		{"DELETE, no Content-Length", get(func(r *http.Request) { r.Method = http.MethodDelete }, nil), true},
		{"PUT, Content-Length: 0", get(func(r *http.Request) { r.Method = http.MethodPut }, nil), true},
		{"empty method", get(func(r *http.Request) { r.Method = "" }, nil), true},
		{"Close", get(func(r *http.Request) { r.Close = true }, nil), true},
		{"Close with Connection: close", get(func(r *http.Request) { r.Close = true; r.Header.Set("Connection", "close") }, nil), false},
		{"User-Agent blank", get(func(r *http.Request) { r.Header["User-Agent"] = []string{""} }, nil), true},
		{"User-Agent with newlines", get(func(r *http.Request) { r.Header["User-Agent"] = []string{" a\r\nb \t"} }, nil), true},
		{"values with newlines, duplicates", get(func(r *http.Request) {
			r.Header["X-B"] = []string{"1\n2", " 3 "}
			r.Header["x-a"] = []string{"lower"}
			r.Header["Bad Name"] = []string{"dropped"}
		}, nil), true},
		{"invalid Host", get(func(r *http.Request) { r.Host = "a b" }, nil), true},
		{"IPv6 zone", get(func(r *http.Request) { r.Host = "[fe80::1%25en0]:80" }, nil), false},
		{"IDNA host", get(func(r *http.Request) { r.Host = "bücher.example" }, nil), false},
		{"opaque URL", get(func(r *http.Request) { r.URL.Opaque = "//up.example/x" }, nil), false},
		{"control byte in path", get(func(r *http.Request) { r.URL.RawPath, r.URL.Path = "", "/a\x7f" }, nil), true},
		{"control byte in query", get(func(r *http.Request) { r.URL.RawQuery = "a=\x01" }, nil), false},
		{"ForceQuery", get(func(r *http.Request) { r.URL.RawQuery, r.URL.ForceQuery = "", true }, nil), true},
		{"Transfer-Encoding", func(ctx context.Context) (*http.Request, *wtBody) {
			req, b := counted(http.MethodPost, 3, "abc", -1, false)(ctx)
			req.TransferEncoding = []string{"chunked"}
			return req, b
		}, false},
		{"body of unknown length", counted(http.MethodPost, -1, "abc", -1, false), false},
		{"ContentLength 0 with a body", counted(http.MethodPost, 0, "abc", -1, false), false},
		{"ContentLength without a body", get(func(r *http.Request) { r.ContentLength = 3 }, nil), false},
		{"body not in memory", counted(http.MethodPost, 3, "abc", -1, false), true},
		{"body longer than ContentLength", counted(http.MethodPost, 2, "abc", -1, false), true},
		{"body shorter than ContentLength", counted(http.MethodPost, 4, "abc", -1, false), true},
		{"body read fails", counted(http.MethodPost, 3, "abc", 1, false), true},
		{"body close fails", counted(http.MethodPost, 3, "abc", -1, true), true},
		{"trace of header fields", func(ctx context.Context) (*http.Request, *wtBody) {
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() {}})
			return get(nil, nil)(ctx)
		}, false},
		{"head past the buffer", get(func(r *http.Request) { r.Header.Set("X-Big", strings.Repeat("v", 5000)) }, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) { wtAgree(t, tc.mk, tc.fast) })
	}
}

// The same with a wire that breaks after every number of bytes up to the
// whole request: the same bytes out, the same error, the body closed once.
func TestWriteRequestBrokenWire(t *testing.T) {
	for _, tc := range []struct {
		name string
		mk   wtRequest
	}{
		{"in memory", contractRequest(strings.Repeat("b", 600), nil)},
		{"not in memory", func(ctx context.Context) (*http.Request, *wtBody) {
			b := &wtBody{r: bytes.NewReader(bytes.Repeat([]byte("b"), 600)), failAt: -1}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://up.example/", nil)
			req.Body, req.ContentLength = b, 600
			return req, b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := wtWrite(tc.mk, false, 256, -1, "", requestWrite)
			for n := 0; n <= len(whole.wire); n++ {
				for _, pre := range []string{"", "PREVIOUS\r\n"} {
					ours := wtWrite(tc.mk, true, 256, n, pre, writeRequest)
					theirs := wtWrite(tc.mk, true, 256, n, pre, requestWrite)
					if !ours.fast && pre == "" {
						t.Fatalf("failing after %d bytes: not the fast path", n)
					}
					if d := wtDiff(ours, theirs); d != "" {
						t.Fatalf("failing after %d bytes, pre %q: %s", n, pre, d)
					}
				}
			}
		})
	}
}

// BenchmarkWriteRequest writes the contract route's upstream request (its
// header and a 1.3 KB body) into a 4 KiB writer, as the transport does,
// with writeRequest and with Request.Write.
func BenchmarkWriteRequest(b *testing.B) {
	body := []byte(strings.Repeat(wtChat, 6))
	target, _ := url.Parse("http://127.0.0.1:18081/v1/chat/completions")
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {}}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	req := (&http.Request{Method: http.MethodPost, URL: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":  {"application/json"},
			"Accept":        {"application/json"},
			"Authorization": {"Bearer sk-upstream-0123456789abcdef"},
			"X-Request-Id":  {"req-0123456789"},
			"Traceparent":   {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}, Host: target.Host}).WithContext(ctx)
	var br bytes.Reader
	rc := io.NopCloser(&br)
	bw := bufio.NewWriterSize(io.Discard, 4<<10)
	for _, tc := range []struct {
		name  string
		write func(*bufio.Writer, *http.Request) error
	}{{"fast", writeRequest}, {"RequestWrite", requestWrite}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				br.Reset(body)
				req.Body, req.ContentLength = rc, int64(len(body))
				if err := tc.write(bw, req); err != nil {
					b.Fatal(err)
				}
				bw.Flush()
			}
		})
	}
}

// FuzzWriteRequestAgrees holds writeRequest to Request.Write for requests
// from the fuzzer: method, path and query, Host (of the request or of its
// URL), header fields (records split by 0x1e, name and value by the first
// ':', values with any bytes), a body of several kinds with ContentLength
// off its length by delta, Close, a trace, the writer's size, a wire that
// breaks after some bytes and a flush before the request. Whenever
// writeRequest takes its own path, the bytes on the wire, how they were
// split into writes, the error, WroteRequest's calls and the body's closes
// (once) must be Request.Write's.
func FuzzWriteRequestAgrees(f *testing.F) {
	f.Add("POST", "/v1/chat/completions", "127.0.0.1:18081", "Content-Type:application/json\x1eAccept:application/json\x1eAuthorization:Bearer k", []byte(wtChat), int8(0), uint8(2|16), uint16(4096), uint16(0))
	f.Add("GET", "/a%20b?q=1&r", "up.example", "X-A: 1 \x1eX-A:\t2\x1ex-a:3\x1eUser-Agent: ua\r\n", []byte(nil), int8(0), uint8(1|16|64), uint16(300), uint16(0))
	f.Add("PUT", "/?", "[::1]:80", "Connection:keep-alive\x1eBad Name:v\x1eX-B:a\nb", []byte("abc"), int8(-1), uint8(4<<1|16), uint16(64), uint16(90))
	f.Add("", "*", "a b", "Host:h\x1eContent-Length:9\x1eTrailer:x", []byte("abcdef"), int8(2), uint8(5<<1|1|128), uint16(100), uint16(5))
	f.Add("PATCH", "/x", "up:1", "", []byte("abcdef"), int8(0), uint8(6<<1|32), uint16(30), uint16(70))
	f.Fuzz(func(t *testing.T, method, target, host, fields string, body []byte, delta int8, flags uint8, bufSize, failAfter uint16) {
		if len(target) > 1024 || len(host) > 256 || len(fields) > 4096 || len(body) > 64<<10 {
			return
		}
		kind := flags >> 1 & 7
		u, err := url.ParseRequestURI(target)
		if err != nil {
			u = &url.URL{Path: target}
		}
		u.Scheme, u.Host = "http", "up.example:8080"
		if flags&32 != 0 {
			u.Host = host
		}
		mk := func(ctx context.Context) (*http.Request, *wtBody) {
			uu := *u
			req := (&http.Request{Method: method, URL: &uu, Header: http.Header{}, Host: host,
				Close: flags&1 != 0, ContentLength: int64(len(body)) + int64(delta)}).WithContext(ctx)
			if flags&32 != 0 {
				req.Host = ""
			}
			for _, rec := range strings.Split(fields, "\x1e") {
				name, value, ok := strings.Cut(rec, ":")
				if !ok {
					continue
				}
				if flags&64 != 0 {
					req.Header.Add(name, value)
				} else {
					req.Header[name] = append(req.Header[name], value)
				}
			}
			var wb *wtBody
			switch kind {
			case 0:
			case 1:
				req.Body = http.NoBody
			case 2:
				req.Body = io.NopCloser(bytes.NewReader(body))
			case 3:
				req.Body = io.NopCloser(strings.NewReader(string(body)))
			case 4:
				req.Body = io.NopCloser(bytes.NewBuffer(bytes.Clone(body)))
			default: // 5: counted, 6: its read fails half-way, 7: its close fails
				wb = &wtBody{r: bytes.NewReader(body), failAt: -1, closeErr: kind == 7}
				if kind == 6 {
					wb.failAt = len(body) / 2
				}
				req.Body = wb
			}
			return req, wb
		}
		size := 16 + int(bufSize)%6000
		fail := -1
		if failAfter > 0 {
			fail = int(failAfter) - 1
		}
		pre := ""
		if flags&128 != 0 {
			pre = "PREVIOUS\r\n"
		}
		traced := flags&16 != 0
		ours := wtWrite(mk, traced, size, fail, pre, writeRequest)
		theirs := wtWrite(mk, traced, size, fail, pre, requestWrite)
		if ours.closes > 1 || theirs.closes > 1 || ours.closes != theirs.closes {
			t.Fatalf("body closed %d times by writeRequest, %d by Request.Write", ours.closes, theirs.closes)
		}
		if !ours.fast {
			return
		}
		if d := wtDiff(ours, theirs); d != "" {
			t.Fatal(d)
		}
		if ours.closes == 0 {
			t.Fatal("body not closed")
		}
	})
}
