package h1_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/h1"
)

// rsCompletion is an OpenAI-style chat completion, the body of the
// replies below.
var rsCompletion = func() []byte {
	b, err := json.Marshal(map[string]any{
		"id": "chatcmpl-rs", "object": "chat.completion", "created": 1726560000, "model": "mock-model-2024-09-01",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": `{"category":"billing","summary":"` + strings.Repeat("a duplicate charge, ", 40) + `"}`}}},
		"usage": map[string]any{"prompt_tokens": 812, "completion_tokens": 402, "total_tokens": 1214},
	})
	if err != nil {
		panic(err)
	}
	return b
}()

// rsServed is the reply a Go net/http server sends for h to a POST:
// the bytes on the wire, read off a real connection.
func rsServed(t testing.TB, h http.HandlerFunc) []byte {
	t.Helper()
	s := httptest.NewServer(h)
	defer s.Close()
	c, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: upstream\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(c, &wire)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	return wire.Bytes()
}

// rsTaken are replies contractd's upstreams send, which must take the
// fast path.
func rsTaken(t testing.TB) []struct{ name, method, reply string } {
	return []struct{ name, method, reply string }{
		// cmd/contractd-bench's mock upstream: its handler sets these two
		// headers and writes the completion.
		{"bench mock", http.MethodPost, string(rsServed(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			h := w.Header()
			h["Content-Type"] = []string{"application/json"}
			h["Content-Length"] = []string{fmt.Sprint(len(rsCompletion))}
			w.Write(rsCompletion)
		}))},
		{"go server, length computed", http.MethodPost, string(rsServed(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", "req_123")
			w.Write(rsCompletion[:500])
		}))},
		{"go server, http.Error", http.MethodPost, string(rsServed(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "model not found", http.StatusNotFound)
		}))},
		{"go server, 204", http.MethodPost, string(rsServed(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}))},
		{"openai style", http.MethodPost, "HTTP/1.1 200 OK\r\nDate: Sun, 29 Nov 2026 20:00:00 GMT\r\nContent-Type: application/json\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n", len(rsCompletion)) + "Connection: keep-alive\r\naccess-control-expose-headers: X-Request-ID\r\n" +
			"openai-organization: user-abc\r\nopenai-processing-ms: 812\r\nopenai-version: 2020-10-01\r\n" +
			"strict-transport-security: max-age=31536000; includeSubDomains; preload\r\nx-ratelimit-limit-requests: 10000\r\n" +
			"x-ratelimit-remaining-tokens: 29999188\r\nx-request-id: req_0a1b2c3d4e5f\r\nCF-Cache-Status: DYNAMIC\r\n" +
			"Set-Cookie: __cf_bm=abc; path=/; HttpOnly\r\nSet-Cookie: _cfuvid=def; path=/; HttpOnly\r\n" +
			"X-Content-Type-Options: nosniff\r\nServer: cloudflare\r\nCF-RAY: 8c2d-AMS\r\nalt-svc: h3=\":443\"; ma=86400\r\n\r\n" + string(rsCompletion)},
		{"uvicorn style", http.MethodPost, "HTTP/1.1 200 OK\r\ndate: Sun, 29 Nov 2026 20:00:00 GMT\r\nserver: uvicorn\r\n" +
			fmt.Sprintf("content-length: %d\r\n", len(rsCompletion)) + "content-type: application/json\r\n\r\n" + string(rsCompletion)},
		{"connection close", http.MethodPost, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy"},
		{"head", http.MethodHead, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"},
		{"head, no length", http.MethodHead, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"},
		{"304", http.MethodGet, "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"},
		{"empty body, pragma", http.MethodGet, "HTTP/1.1 200\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n"},
		{"many headers", http.MethodGet, "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 62) + "Content-Length: 5\r\n\r\nhello"},
	}
}

func TestReadSimpleTakesUpstreamReplies(t *testing.T) {
	for _, c := range rsTaken(t) {
		t.Run(c.name, func(t *testing.T) {
			if taken := rsAgree(t, []byte(c.reply), c.method, 0, 512, false); !taken {
				t.Errorf("declined %q", c.reply)
			}
		})
	}
}

func TestReadSimpleDeclines(t *testing.T) {
	for _, c := range []struct{ name, method, reply string }{
		{"chunked", "", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{"chunked and length", "", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{"trailer", "", "HTTP/1.1 200 OK\r\nTrailer: X-A\r\nContent-Length: 5\r\n\r\nhello"},
		{"100 continue", "", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
		{"101", "", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n"},
		{"http/1.0", "", "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
		{"no length", "", "HTTP/1.1 200 OK\r\n\r\nuntil the end"},
		{"two lengths", "", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"},
		{"signed length", "", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello"},
		{"length too large", "", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nhello"},
		{"empty length", "", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nhello"},
		{"bare lf", "", "HTTP/1.1 200 OK\nContent-Length: 5\n\nhello"},
		{"bare lf in the head", "", "HTTP/1.1 200 OK\r\nX-A: b\nContent-Length: 5\r\n\r\nhello"},
		{"folded", "", "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 5\r\n\r\nhello"},
		{"space before the colon", "", "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 5\r\n\r\nhello"},
		{"non-ascii value", "", "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 5\r\n\r\nhello"},
		{"control in the reason", "", "HTTP/1.1 200 O\x01K\r\nContent-Length: 5\r\n\r\nhello"},
		{"two spaces after the version", "", "HTTP/1.1  200 OK\r\nContent-Length: 5\r\n\r\nhello"},
		{"status 099", "", "HTTP/1.1 099 x\r\nContent-Length: 5\r\n\r\nhello"},
		{"head incomplete", "", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"},
		{"head longer than the buffer", "", "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", h1.BufSize) + "\r\nContent-Length: 5\r\n\r\nhello"},
		{"not http", "", "SSH-2.0-OpenSSH_9.6\r\n\r\n"},
		{"blank first line", "", "\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
		{"more lines than it counts", "", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 63) + "Content-Length: 5\r\n\r\nhello"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if rsAgree(t, []byte(c.reply), c.method, 0, 512, false) {
				t.Errorf("took %q", c.reply)
			}
		})
	}
}

// FuzzReadResponseAgrees: wherever the fast path takes a reply, what it
// makes of it is what http.ReadResponse makes of the same bytes, the body
// and what follows it included; where it declines, it consumed nothing
// (http.ReadResponse after it reads what it reads from fresh).
func FuzzReadResponseAgrees(f *testing.F) {
	for _, c := range rsTaken(f) {
		f.Add([]byte(c.reply), c.method, uint16(0), uint16(512), false)
	}
	for _, c := range dtCases() {
		f.Add([]byte(c.reply), c.method, uint16(7), uint16(3), true)
	}
	f.Fuzz(func(t *testing.T, reply []byte, method string, chunk, readSize uint16, eofWithData bool) {
		if len(reply) > 16<<10 {
			reply = reply[:16<<10]
		}
		rsAgree(t, reply, method, int(chunk), 1+int(readSize)%(2*h1.BufSize), eofWithData)
	})
}

// rsAgree reads reply with the fast path and with http.ReadResponse, each
// through a reader of h1's size over a source giving at most chunk bytes
// a read (0: all it has) and, with eofWithData, io.EOF with its last
// bytes, and fails t where they differ. It reports whether the fast path
// took the reply.
func rsAgree(t *testing.T, reply []byte, method string, chunk, readSize int, eofWithData bool) bool {
	t.Helper()
	req := &http.Request{Method: method}
	src := &rsSource{r: bytes.NewReader(reply), chunk: chunk, eofWithData: eofWithData}
	br := bufio.NewReaderSize(src, h1.BufSize)
	ref := &rsSource{r: bytes.NewReader(reply), chunk: chunk, eofWithData: eofWithData}
	refBr := bufio.NewReaderSize(ref, h1.BufSize)
	want, wantErr := http.ReadResponse(refBr, req)

	got, ok, err := h1.ReadSimple(br, req)
	if !ok {
		// Declined: http.ReadResponse must find everything still there.
		got, err = http.ReadResponse(br, req)
	}
	if (err != nil) != (wantErr != nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("error %v, http.ReadResponse's %v (fast path taken %v)", err, wantErr, ok)
	}
	if err != nil {
		return ok
	}
	if got.Request != req || want.Request != req {
		t.Errorf("Request not the request")
	}
	type head struct {
		Status                 string
		StatusCode             int
		Proto                  string
		ProtoMajor, ProtoMinor int
		Header                 http.Header
		ContentLength          int64
		TransferEncoding       []string
		Close, Uncompressed    bool
		Trailer                http.Header
		NoBody                 bool
	}
	hd := func(r *http.Response) head {
		return head{r.Status, r.StatusCode, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Header, r.ContentLength,
			r.TransferEncoding, r.Close, r.Uncompressed, r.Trailer, r.Body == http.NoBody}
	}
	if g, w := hd(got), hd(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("fast path taken %v:\n got  %+v\n want %+v", ok, g, w)
	}
	gb, ge, ga := rsDrain(t, got.Body, readSize)
	wb, we, wa := rsDrain(t, want.Body, readSize)
	if !bytes.Equal(gb, wb) || fmt.Sprint(ge) != fmt.Sprint(we) || fmt.Sprint(ga) != fmt.Sprint(wa) {
		t.Fatalf("fast path taken %v: body %q, error %v, then %v; http.ReadResponse's %q, %v, then %v", ok, gb, ge, ga, wb, we, wa)
	}
	if g, w := br.Buffered()+src.r.Len(), refBr.Buffered()+ref.r.Len(); g != w {
		t.Fatalf("fast path taken %v: %d bytes left after the body, http.ReadResponse %d", ok, g, w)
	}
	return ok
}

// rsDrain reads body to its first error in reads of size bytes, and reads
// once more after it.
func rsDrain(t *testing.T, body io.Reader, size int) (data []byte, err, after error) {
	p := make([]byte, size)
	for i := 0; ; i++ {
		n, err := body.Read(p)
		data = append(data, p[:n]...)
		if err != nil {
			_, after = body.Read(p)
			return data, err, after
		}
		if i > 1<<16 {
			t.Fatal("body read does not end")
		}
	}
}

// rsSource gives r's bytes at most chunk a read (0: as many as asked)
// and, with eofWithData, io.EOF together with the last of them.
type rsSource struct {
	r           *bytes.Reader
	chunk       int
	eofWithData bool
}

func (s *rsSource) Read(p []byte) (int, error) {
	if s.chunk > 0 && len(p) > s.chunk {
		p = p[:s.chunk]
	}
	n, err := s.r.Read(p)
	if err == nil && s.eofWithData && s.r.Len() == 0 {
		err = io.EOF
	}
	return n, err
}

// BenchmarkReadResponse reads the bench mock's reply, head and body, with
// the fast path and with http.ReadResponse.
func BenchmarkReadResponse(b *testing.B) {
	reply := rsTaken(b)[0].reply
	req := &http.Request{Method: http.MethodPost}
	for _, tc := range []struct {
		name string
		read func(*bufio.Reader) (*http.Response, error)
	}{
		{"fast", func(br *bufio.Reader) (*http.Response, error) {
			resp, ok, err := h1.ReadSimple(br, req)
			if !ok {
				b.Fatal("declined")
			}
			return resp, err
		}},
		{"nethttp", func(br *bufio.Reader) (*http.Response, error) { return http.ReadResponse(br, req) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			src := strings.NewReader(reply)
			br := bufio.NewReaderSize(src, h1.BufSize)
			p := make([]byte, h1.BufSize)
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(reply)
				br.Reset(src)
				resp, err := tc.read(br)
				if err != nil {
					b.Fatal(err)
				}
				for err == nil {
					_, err = resp.Body.Read(p)
				}
				if err != io.EOF {
					b.Fatal(err)
				}
			}
		})
	}
}
