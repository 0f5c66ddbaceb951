package main

// In-process twins of the load benchmark, for CPU profiles (contractd has
// no pprof endpoint):
//
//	go test -run '^$' -bench Contractd -cpuprofile /tmp/cpu.out ./cmd/contractd-bench
//	go tool pprof -top -nodecount 40 /tmp/cpu.out
//
// BenchmarkContractdHTTP serves the benchmark route with proxy.Server behind
// the same telemetry middleware and logger the binary uses, over loopback
// HTTP, against the same mock upstream; BenchmarkContractdHandler skips both
// sockets (in-memory upstream, recorder) to isolate contractd's own work.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/jsonlog"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/telemetry"
)

func loadBenchRuntime(tb testing.TB, upstreamURL string) *config.Runtime {
	tb.Helper()
	rt, err := config.LoadBytes("bench.yaml", []byte(configYAML("127.0.0.1:0", "127.0.0.1:0", upstreamURL, "info")))
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return rt
}

// TestFixture: the mock's output is valid against the benchmark contract,
// the invalid one is not, and the config the run writes compiles.
func TestFixture(t *testing.T) {
	rt := loadBenchRuntime(t, "http://127.0.0.1:1/v1")
	route := rt.Routes["triage"]
	if route == nil || route.Contract == nil {
		t.Fatal("no triage contract route")
	}
	if n := len(benchOutput); n < 1300 || n > 1700 {
		t.Errorf("benchmark output is %d bytes, want ~1.5 KB", n)
	}
	subj := &contracts.Subject{}
	if res := route.Contract.Check(benchOutput, subj); !res.Valid {
		t.Errorf("benchmark output is invalid: %+v", res.Violations)
	}
	res := route.Contract.Check(benchInvalidOutput, subj)
	if res.Valid {
		t.Error("the invalid output passes")
	}
	if len(rt.Warnings) > 0 {
		t.Errorf("config warnings: %v", rt.Warnings)
	}
}

// newInProcess builds the server the way cmd/contractd's serve does, its
// audit lines encoded and thrown away.
func newInProcess(tb testing.TB, rt *config.Runtime, client *http.Client) http.Handler {
	return newInProcessSink(tb, rt, client, audit.NewWriter(io.Discard))
}

// newInProcessSink is newInProcess with the audit sink given. Its logger
// is serve's: the JSON handler serve logs with (internal/jsonlog) behind
// telemetry's trace-id handler, writing to nowhere.
func newInProcessSink(tb testing.TB, rt *config.Runtime, client *http.Client, sink audit.Sink) http.Handler {
	tb.Helper()
	logger := slog.New(telemetry.LogHandler(jsonlog.New(io.Discard, slog.LevelInfo)))
	tel, err := telemetry.New(telemetry.Options{Logger: logger, Global: true})
	if err != nil {
		tb.Fatal(err)
	}
	caller := proxy.NewCaller(func(*config.Upstream) string { return "" })
	if client != nil {
		caller.Client = client
	}
	srv := proxy.NewServer(rt, caller, sink, logger)
	srv.Telemetry = tel
	return tel.Middleware(srv.Handler(nil))
}

func BenchmarkContractdHTTP(b *testing.B) {
	up := httptest.NewServer(newMockUpstream())
	defer up.Close()
	front := httptest.NewServer(newInProcess(b, loadBenchRuntime(b, up.URL+"/v1"), nil))
	defer front.Close()
	client := newClient(64)
	defer client.CloseIdleConnections()
	body := requestBody("")
	url := front.URL + "/v1/chat/completions"
	b.SetParallelism(8) // 8 x GOMAXPROCS (2 here): concurrency 16
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var buf bytes.Buffer
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			buf.Reset()
			_, _ = io.Copy(&buf, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("HTTP %d: %s", resp.StatusCode, buf.Bytes())
				return
			}
		}
	})
}

// memTransport is the mock upstream without a socket or a recorder: it
// reads the request body as an upstream would and answers from the mock's
// prebuilt bytes, so the benchmark counts contractd's allocations, not
// the harness's.
type memTransport struct{ m *mockUpstream }

func (t memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := t.m.reply(r.Body)
	r.Body.Close()
	// net/http's transport reports the request written once it has read
	// the body to its end; contractd reuses its upstream body buffer only
	// then (proxy/upbody.go).
	if tr := httptrace.ContextClientTrace(r.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	return testkit.JSONResponse(r, body), nil
}

// BenchmarkContractdHandler is the whole handler (telemetry middleware,
// routing, the contract pipeline, the answer) per request, with an
// in-memory upstream. Run with -benchmem: allocs/op and B/op are the
// per-request figures docs/benchmarks.md records. One sub-benchmark per
// edge (chat, the Responses API) over the same route and output: their
// ratio is the Responses edge's cost without sockets or load-generator
// noise; and the passthrough route for comparison. chat-sink-none is chat
// with the audit sink contractd-bench's config names (none), which skips
// work only the audit line shows.
func BenchmarkContractdHandler(b *testing.B) {
	client := &http.Client{Transport: memTransport{newMockUpstream()}}
	h := newInProcess(b, loadBenchRuntime(b, "http://mock.invalid/v1"), client)
	none, err := audit.New(audit.SinkNone, "")
	if err != nil {
		b.Fatal(err)
	}
	hNone := newInProcessSink(b, loadBenchRuntime(b, "http://mock.invalid/v1"), client, none)
	for _, e := range []struct {
		name, path string
		body       []byte
		h          http.Handler
	}{
		{"chat", "/v1/chat/completions", requestBody(""), h},
		{"responses", "/v1/responses", responsesBody(""), h},
		{"passthrough", "/r/hop/v1/chat/completions", requestBody(""), h},
		{"chat-sink-none", "/v1/chat/completions", requestBody(""), hNone},
	} {
		b.Run(e.name, func(b *testing.B) { postParallel(b, e.h, e.path, e.body, 1) })
	}
}

// postParallel is the benchmark's loop on every P: body POSTed to path
// through h, the answer written to a reused SinkWriter; an answer other
// than 200 with at least minBytes ends the benchmark failed.
func postParallel(b *testing.B, h http.Handler, path string, body []byte, minBytes int) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := testkit.NewSinkWriter()
		ctx := context.Background()
		for pb.Next() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
			req.Header["Content-Type"] = []string{"application/json"}
			w.Reset()
			h.ServeHTTP(w, req)
			if w.Status != 200 || w.N < minBytes {
				b.Errorf("HTTP %d, %d bytes", w.Status, w.N)
				return
			}
		}
	})
}

// BenchmarkValidateOnly is the contract check alone (extraction, schema,
// policies) on the benchmark output.
func BenchmarkValidateOnly(b *testing.B) {
	k := loadBenchRuntime(b, "http://mock.invalid/v1").Routes["triage"].Contract
	subj := &contracts.Subject{}
	b.ReportAllocs()
	for b.Loop() {
		if res := k.Check(benchOutput, subj); !res.Valid {
			b.Fatal(res.Violations)
		}
	}
}

// BenchmarkDirectHTTP is the baseline: the load generator's client against
// the mock alone.
func BenchmarkDirectHTTP(b *testing.B) {
	up := httptest.NewServer(newMockUpstream())
	defer up.Close()
	client := newClient(64)
	defer client.CloseIdleConnections()
	body := requestBody("")
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(up.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// TestWriteSection: -out replaces the generated section and keeps the rest.
func TestWriteSection(t *testing.T) {
	p := t.TempDir() + "/b.md"
	if err := writeSection(p, "first\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	doc := strings.Replace(string(b), "# Benchmarks\n", "# Benchmarks\n\nintro\n", 1) + "\n## After\n\nkept\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, md := range []string{"second\n", "third\n"} {
		if err := writeSection(p, md); err != nil {
			t.Fatal(err)
		}
	}
	b, _ = os.ReadFile(p)
	got := string(b)
	for _, want := range []string{"intro\n", "third\n", "## After\n\nkept\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "first") || strings.Contains(got, "second") || strings.Count(got, endMarker) != 1 {
		t.Errorf("old sections left behind:\n%s", got)
	}
}

// streamTransport answers every call with a 200 event stream of
// streamEvents chat chunks and [DONE], one event per read, as a streaming
// upstream's body arrives.
type streamTransport struct{ events [][]byte }

const streamEvents = 20

func newStreamTransport() streamTransport {
	var t streamTransport
	for i := range streamEvents {
		t.events = append(t.events, fmt.Appendf(nil, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"token %d "},"finish_reason":null}]}`+"\n\n", i))
	}
	t.events = append(t.events, []byte("data: [DONE]\n\n"))
	return t
}

type eventReader struct{ events [][]byte }

func (r *eventReader) Read(p []byte) (int, error) {
	if len(r.events) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.events[0])
	if r.events[0] = r.events[0][n:]; len(r.events[0]) == 0 {
		r.events = r.events[1:]
	}
	return n, nil
}

func (t streamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, ContentLength: -1,
		Body: io.NopCloser(&eventReader{events: slices.Clone(t.events)}), Request: r}, nil
}

// BenchmarkPassthroughStream is a streaming passthrough request through
// the whole handler: the upstream's event stream relayed (and flushed)
// event by event to the client.
func BenchmarkPassthroughStream(b *testing.B) {
	h := newInProcess(b, loadBenchRuntime(b, "http://mock.invalid/v1"), &http.Client{Transport: newStreamTransport()})
	body := []byte(`{"model":"hop","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	postParallel(b, h, "/v1/chat/completions", body, streamEvents*100)
}
