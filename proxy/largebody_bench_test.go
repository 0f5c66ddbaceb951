package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
)

// largeBody is a chat request for route whose one user message is size
// bytes of text, as the soak's slow uploads send: a 1 MB body costs
// contractd CPU in parsing, copying and hashing that small requests then
// wait behind.
func largeBody(route string, size int) []byte {
	head := `{"model":"` + route + `","messages":[{"role":"user","content":"`
	tail := `"}]}`
	return []byte(head + strings.Repeat("x", max(1, size-len(head)-len(tail))) + tail)
}

// drainTransport is an upstream without a socket: it reads the request
// body as an upstream would and answers one small valid completion, so
// the benchmark counts contractd's work on the body, not a harness's.
type drainTransport struct{ reply []byte }

func (t drainTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return testkit.JSONResponse(r, t.reply), nil
}

// BenchmarkLargeBody is one contract-route chat request whose body is
// 1 MB (and, for scale, 64 KB) of message text: the whole handler with an
// in-memory upstream ("handler"; review.dedupe_window on, as by default,
// every body distinct), and Prepare plus attempt 1's Build alone
// ("prepare"). cpu-ns/op is the CPU the process spent per request (user
// and system time, the GC's included), which a loaded machine changes
// far less than ns/op; B/op is what a request allocates.
//
//	go test -run '^$' -bench LargeBody -benchmem ./proxy/
func BenchmarkLargeBody(b *testing.B) {
	up := drainTransport{reply: completion(validAnswer, "stop", 10, 5)}
	rt := loadRuntime(b, "http://upstream.invalid/v1", cfg{MaxBody: 4 << 20})
	caller := NewCaller(testKeys)
	caller.Client = &http.Client{Transport: up}
	srv := NewServer(rt, caller, audit.NewWriter(io.Discard), nil)
	srv.Env = testEnv
	srv.Swap(rt)
	h := srv.Handler(nil)
	route := rt.Routes["free"]
	for _, size := range []int{64 << 10, 1 << 20} {
		name := fmt.Sprintf("%dKB", size>>10)
		b.Run("handler/"+name, func(b *testing.B) {
			defer testkit.CPUPerOp(b)()
			body := largeBody("free", size)
			at := bytes.Index(body, []byte(`"content":"`)) + len(`"content":"`)
			w := testkit.NewSinkWriter()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				copy(body[at:], fmt.Sprintf("%020d", i)) // distinct: no dedupe
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
				req.Header["Content-Type"] = []string{"application/json"}
				req.Header["Authorization"] = []string{"Bearer client-key-1"}
				w.Reset()
				h.ServeHTTP(w, req)
				if w.Status != 200 || w.N == 0 {
					b.Fatalf("HTTP %d, %d bytes", w.Status, w.N)
				}
			}
		})
		b.Run("prepare/"+name, func(b *testing.B) {
			defer testkit.CPUPerOp(b)()
			body := largeBody("free", size)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				p, aerr := Prepare(route, body)
				if aerr != nil {
					b.Fatal(aerr.Message)
				}
				if _, aerr := p.Build(route.Plan[0]); aerr != nil {
					b.Fatal(aerr.Message)
				}
			}
		})
	}
}
