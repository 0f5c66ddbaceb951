package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
)

func TestMain(m *testing.M) {
	// Warm the network poller and the resolver paths once, so the first
	// test's "before" counts already include the process-wide descriptors
	// (epoll, its eventfd) and goroutines the runtime keeps.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c := &http.Client{Transport: &http.Transport{}}
	if resp, err := c.Get(srv.URL); err == nil {
		resp.Body.Close()
	}
	c.CloseIdleConnections()
	srv.Close()
	os.Exit(m.Run())
}

// ------------------------------------------------------------------ leaks

// noLeaks records goroutines and descriptors now and, at cleanup (after
// every cleanup registered later has closed servers and idle
// connections), waits for both to settle back. Register it first.
func noLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(testkit.LeakCheck(t))
}

// --------------------------------------------------------------- upstream

// upstream is a scripted fake OpenAI upstream (testkit.Upstream: it
// records every call, counts hits and peak concurrency). handle gets the
// 1-based hit number. Hung handlers return when the caller gives up or on
// Close.
type upstream struct{ *testkit.Upstream }

func newUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int)) *upstream {
	t.Helper()
	return &upstream{testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) { h(w, r, c.N) })}
}

// hang blocks until the caller gives up (noted for waitCanceled) or the
// test ends.
func (u *upstream) hang(r *http.Request) { u.Hang(r) }

// newHangingUpstream is an upstream that never answers: every request
// hangs (see hang) until the caller gives up or the test ends.
func newHangingUpstream(t *testing.T) *upstream {
	t.Helper()
	var up *upstream
	up = newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) { up.hang(r) })
	return up
}

// waitCanceled waits for n upstream requests to see their context end.
func (u *upstream) waitCanceled(t *testing.T, n int, within time.Duration) {
	t.Helper()
	u.WaitCanceled(t, n, within)
}

// auths are the Authorization headers the upstream received.
func (u *upstream) auths() []string {
	var out []string
	for _, c := range u.Calls() {
		out = append(out, c.Header.Get("Authorization"))
	}
	return out
}

// rawUpstream is a TCP listener that reads one request per connection and
// hands the raw connection to script: resets and torn bodies need the
// socket itself.
type rawUpstream struct {
	ln   net.Listener
	hits atomic.Int64
	wg   sync.WaitGroup
}

func newRawUpstream(t *testing.T, script func(c *net.TCPConn, n int)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	u.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if !readRequest(c) {
					return
				}
				script(c.(*net.TCPConn), int(u.hits.Add(1)))
			})
		}
	})
	t.Cleanup(func() { ln.Close(); u.wg.Wait() })
	return u
}

// readRequest consumes one HTTP/1.1 request with a Content-Length body.
func readRequest(c net.Conn) bool {
	var buf bytes.Buffer
	tmp := make([]byte, 4096)
	for {
		n, err := c.Read(tmp)
		buf.Write(tmp[:n])
		if i := bytes.Index(buf.Bytes(), []byte("\r\n\r\n")); i >= 0 {
			head := strings.ToLower(buf.String()[:i])
			cl := 0
			for _, l := range strings.Split(head, "\r\n") {
				if v, ok := strings.CutPrefix(l, "content-length:"); ok {
					fmt.Sscan(strings.TrimSpace(v), &cl)
				}
			}
			for buf.Len() < i+4+cl {
				n, err := c.Read(tmp)
				buf.Write(tmp[:n])
				if err != nil {
					return false
				}
			}
			return true
		}
		if err != nil {
			return false
		}
	}
}

func (u *rawUpstream) URL() string { return "http://" + u.ln.Addr().String() + "/v1" }
func (u *rawUpstream) Hits() int   { return int(u.hits.Load()) }

// reset aborts the connection with a TCP RST.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// ------------------------------------------------------------ completions

const (
	validAnswer = `{"answer":"forty-two"}`
	upstreamKey = "sk-upstream-SECRET-0123456789"
	keyAlpha    = "ck-alpha-SECRET-aaaaaaaaaaaa"
	keyBeta     = "ck-beta-SECRET-bbbbbbbbbbbbb"
)

func completion(content string) []byte {
	return testkit.Completion{ID: "chatcmpl-up", Model: "up-model", Content: content, PromptTokens: 10, CompletionTokens: 5}.JSON()
}

func reply(w http.ResponseWriter, status int, body []byte) { testkit.Reply(w, status, body) }

func okHandler(w http.ResponseWriter, r *http.Request, n int) { reply(w, 200, completion(validAnswer)) }

// slowOK answers as okHandler does, after d, unless the caller gives up
// first.
func slowOK(d time.Duration) func(w http.ResponseWriter, r *http.Request, n int) {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		okHandler(w, r, n)
	}
}

// ----------------------------------------------------------------- config

// opts are the knobs of the test config.
type opts struct {
	UpTimeout      string // upstream timeout, default 300ms
	MaxRetries     int    // default 2 (-1: 0)
	MaxConcurrency int
	RequestTimeout string // default 5s
	MaxBody        int    // default 4096
	Keys           bool   // server.api_keys_env set (keyAlpha, keyBeta)
	RateLimit      string // e.g. "{requests_per_second: 2, burst: 3}"
	NoPassthrough  bool
	// server limits ("": default).
	BodyReadTimeout, MaxInflight, MaxConnections string
	// listeners, for the binary ("": the default).
	Listen, AdminListen string
}

func configYAML(upURL string, o opts) string {
	retries := o.MaxRetries
	if retries == 0 {
		retries = 2
	} else if retries < 0 {
		retries = 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  max_body_bytes: %d\n  request_timeout: %s\n", testkit.Or(o.MaxBody, 4096), testkit.Or(o.RequestTimeout, "5s"))
	if o.Keys {
		b.WriteString("  api_keys_env: FAULTS_CLIENT_KEYS\n")
	}
	if o.RateLimit != "" {
		b.WriteString("  rate_limit: " + o.RateLimit + "\n")
	}
	for _, kv := range [][2]string{{"body_read_timeout", o.BodyReadTimeout}, {"max_inflight_bytes", o.MaxInflight}, {"max_connections", o.MaxConnections},
		{"listen", o.Listen}, {"admin_listen", o.AdminListen}} {
		if kv[1] != "" {
			b.WriteString("  " + kv[0] + ": " + kv[1] + "\n")
		}
	}
	fmt.Fprintf(&b, `audit:
  sink: none
upstreams:
  - name: up
    base_url: %s
    api_key_env: FAULTS_UPSTREAM_KEY
    timeout: %s
    max_retries: %d
`, upURL, testkit.Or(o.UpTimeout, "300ms"), retries)
	if o.MaxConcurrency > 0 {
		fmt.Fprintf(&b, "    max_concurrency: %d\n", o.MaxConcurrency)
	}
	b.WriteString(`prompts:
  - name: ask
    system: |
      Answer the user's question as one JSON object matching {{ schema }}
contracts:
  - name: answer_v1
    schema:
      type: object
      required: [answer]
      additionalProperties: false
      properties: {answer: {type: string, maxLength: 200}}
routes:
  - name: c
    upstream: up
    model: up-model
    prompt: ask
    contract: answer_v1
    temperature: 0.5
    max_output_tokens: 100
`)
	if !o.NoPassthrough {
		b.WriteString(`  - name: p
    upstream: up
    model: up-model
    passthrough: true
`)
	}
	return b.String()
}

func load(t testing.TB, upURL string, o opts) *config.Runtime {
	t.Helper()
	return testkit.LoadRuntime(t, "faults.yaml", configYAML(upURL, o))
}

// ----------------------------------------------------------------- server

// syncBuffer collects log and audit output for the secrets checks.
type syncBuffer struct{ testkit.SyncBuffer }

// waitEvents waits until n audit events were written.
func (s *syncBuffer) waitEvents(t *testing.T, n int) []audit.Event {
	t.Helper()
	return s.WaitAuditEvents(t, n)
}

type env struct {
	t      *testing.T
	srv    *proxy.Server
	caller *proxy.Caller
	front  *httptest.Server // nil when hard is used
	hard   *hardServer
	url    string
	client *http.Client
	logs   *syncBuffer
	audit  *syncBuffer
	upURL  string
}

func testEnv(name string) string {
	switch name {
	case "FAULTS_CLIENT_KEYS":
		return keyAlpha + ", " + keyBeta
	}
	return ""
}

func upstreamKeys(u *config.Upstream) string {
	if u.APIKeyEnv == "" {
		return ""
	}
	return upstreamKey
}

// newEnv serves the config o over upURL through an httptest server, or,
// with hard set, through an http.Server configured as serve.go does (with
// the given timeouts scaled for tests).
func newEnv(t *testing.T, upURL string, o opts, hard *hardTimeouts) *env {
	t.Helper()
	if hard != nil && o.BodyReadTimeout == "" {
		o.BodyReadTimeout = hard.Read.String()
	}
	rt := load(t, upURL, o)
	caller := proxy.NewCaller(upstreamKeys)
	caller.Backoff = 5 * time.Millisecond
	logs, auditBuf := &syncBuffer{}, &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := proxy.NewServer(rt, caller, audit.NewWriter(auditBuf), logger)
	srv.Env = testEnv
	srv.Swap(rt) // again, now that Env reads the test's keys
	if hard != nil {
		srv.WriteGrace = hard.Write
	}
	e := &env{t: t, srv: srv, caller: caller, logs: logs, audit: auditBuf, upURL: upURL,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	h := srv.Handler(&proxy.Admin{})
	if hard != nil {
		e.hard = startHard(t, h, *hard, &srv.Conns)
		e.url = "http://" + e.hard.ln.Addr().String()
	} else {
		e.front = httptest.NewServer(h)
		e.url = e.front.URL
	}
	t.Cleanup(e.Close)
	return e
}

func (e *env) Close() {
	if e.front != nil {
		e.front.CloseClientConnections()
		e.front.Close()
	}
	if e.hard != nil {
		e.hard.Close()
	}
	e.client.CloseIdleConnections()
	e.caller.Client.CloseIdleConnections()
}

func (e *env) reload(o opts) {
	e.srv.Swap(load(e.t, e.upURL, o))
}

// result is a client-side response.
type result struct {
	Status  int
	Header  http.Header
	Body    []byte
	Err     error // transport error (connection reset, truncated body…)
	Elapsed time.Duration
}

func (r *result) errField(name string) string {
	var b struct {
		Error map[string]any `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &b)
	s, _ := b.Error[name].(string)
	return s
}

const askC = `{"model":"c","messages":[{"role":"user","content":"What is six times seven?"}]}`
const askP = `{"model":"p","messages":[{"role":"user","content":"hi"}]}`

// post sends body to /v1/chat/completions with keyAlpha (when hdr does
// not override Authorization) and reads the whole reply. It never fails
// the test on transport errors: they are an outcome some faults define.
func (e *env) post(ctx context.Context, body string, hdr ...string) *result {
	e.t.Helper()
	return e.postTo(ctx, "/v1/chat/completions", body, hdr...)
}

// postTo is post to another endpoint (path: "/v1/responses").
func (e *env) postTo(ctx context.Context, path, body string, hdr ...string) *result {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+keyAlpha)
	testkit.SetHeaders(req.Header, hdr...)
	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		return &result{Err: err, Elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &result{Status: resp.StatusCode, Header: resp.Header, Body: b, Err: err, Elapsed: time.Since(start)}
}

// postAll sends every body at once (each as post does) and returns the
// results in the bodies' order.
func (e *env) postAll(bodies ...string) []*result {
	e.t.Helper()
	res := make([]*result, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() { ; res[i] = e.post(context.Background(), body) })
	}
	wg.Wait()
	return res
}

// wantError checks an OpenAI error envelope.
func wantError(t *testing.T, r *result, status int, typ, code string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("transport error %v, want HTTP %d %s", r.Err, status, code)
	}
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	var b struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Error == nil {
		t.Fatalf("not an error envelope: %s", r.Body)
	}
	if b.Error["type"] != typ || b.Error["code"] != code {
		t.Fatalf("type/code %v/%v, want %s/%s; body %s", b.Error["type"], b.Error["code"], typ, code, r.Body)
	}
	if m, _ := b.Error["message"].(string); m == "" {
		t.Errorf("empty message: %s", r.Body)
	}
	if _, ok := b.Error["param"]; !ok {
		t.Errorf("error.param missing: %s", r.Body)
	}
	if id := r.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Errorf("X-Request-Id %q", id)
	}
}

func wantOK(t *testing.T, r *result) {
	t.Helper()
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d err %v, want 200; body %s", r.Status, r.Err, r.Body)
	}
}

// ------------------------------------------------------- hardened server

// hardTimeouts are the limits serve.go's server has, scaled down so the
// tests run in milliseconds rather than seconds: ReadHeader and Idle are
// the http.Server's (proxy.NewHTTPServer), Read is the config's
// body_read_timeout and Write the Server's WriteGrace past request_timeout
// (both set per request by proxy.Server.Deadlines).
type hardTimeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// serveGoTimeouts are the full-scale values; TestServeGoTimeoutsMirrored
// checks proxy.NewHTTPServer and the config defaults still have them.
var serveGoTimeouts = hardTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 120 * time.Second}

// serveGoMaxHeaderBytes mirrors serve.go's MaxHeaderBytes.
const serveGoMaxHeaderBytes = 64 << 10

var testTimeouts = hardTimeouts{ReadHeader: 300 * time.Millisecond, Read: 600 * time.Millisecond, Write: 2 * time.Second, Idle: 500 * time.Millisecond}

type hardServer struct {
	hs   *http.Server
	ln   net.Listener
	done chan struct{}
}

func startHard(t *testing.T, h http.Handler, to hardTimeouts, conns *proxy.ConnLimit) *hardServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = conns.Listener(ln) // max_connections, as serve.go does
	hs := proxy.NewHTTPServer(h)
	conns.Track(hs)
	hs.ReadHeaderTimeout, hs.IdleTimeout = to.ReadHeader, to.Idle
	s := &hardServer{ln: ln, done: make(chan struct{}), hs: hs}
	go func() { defer close(s.done); _ = s.hs.Serve(ln) }()
	return s
}

func (s *hardServer) Close() {
	_ = s.hs.Close()
	<-s.done
}
