package proxy

// Passthrough routes: forwarded untouched but for model and
// Authorization, SSE relayed event by event, client disconnects cancel the
// upstream call.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
)

func TestPassthroughForwardsUntouched(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		w.Header().Set("X-Request-Id", "upstream-req-id")
		w.Header().Set("X-Upstream", "yes")
		reply(w, 201, []byte(`{"upstream":"says hi"}`))
	}, cfg{})
	// Everything contract routes reject or rewrite is forwarded as sent.
	client := `{"temperature":1.30,"model":"raw","tools":[{"type":"function"}],"n":2,"stream_options":{"x":1},` +
		`"messages":[{"role":"system","content":"\u00e9 sys"},{"role":"developer","content":"d"}],"seed":1e3,"x":[1E2,"\/"]}`
	r := h.post("", client, "X-Custom: keep-me", "OpenAI-Project: p1")
	if r.Status != 201 || string(r.Body) != `{"upstream":"says hi"}` {
		t.Fatalf("status %d body %s", r.Status, r.Body)
	}
	if r.Header.Get("X-Upstream") != "yes" {
		t.Error("upstream response header not relayed")
	}
	if ids := r.Header.Values("X-Request-Id"); len(ids) != 1 || !strings.HasPrefix(ids[0], "req_") {
		t.Errorf("X-Request-Id %q, want exactly contractd's", ids)
	}
	wantContractHeaders(t, r, "", 0)
	c := h.up.Calls()[0]
	want := strings.Replace(client, `"model":"raw"`, `"model":"raw-upstream-model"`, 1)
	if string(c.Body) != want {
		t.Errorf("upstream body\n got %s\nwant %s", c.Body, want)
	}
	if got := c.Header.Get("Authorization"); got != "Bearer "+upstreamKey+"up-slow" {
		t.Errorf("Authorization %q", got)
	}
	if c.Header.Get("X-Custom") != "keep-me" || c.Header.Get("OpenAI-Project") != "p1" {
		t.Errorf("client headers not forwarded: %v", c.Header)
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			if strings.Contains(v, "client-key") {
				t.Errorf("client key forwarded in %s", k)
			}
		}
	}
	ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
	if ev.Outcome != "passthrough" || ev.Status != 201 || ev.Route != "raw" || len(ev.Attempts) != 1 ||
		ev.Attempts[0].UpstreamStatus != 201 || ev.Attempts[0].Violations == nil {
		t.Errorf("audit %+v", ev)
	}
	// The hash is of the forwarded body (only a discarding sink skips it).
	if ev.InputSHA256 != sha([]byte(want)) {
		t.Errorf("input_sha256 %q, want the forwarded body's", ev.InputSHA256)
	}
	// By path too; the body's model is replaced all the same.
	r = h.post("/r/raw/v1/chat/completions", `{"model":"whatever","x":1}`)
	if r.Status != 201 || string(h.up.Calls()[1].Body) != `{"model":"raw-upstream-model","x":1}` {
		t.Errorf("by path: %d %s", r.Status, h.up.Calls()[1].Body)
	}
	// A name spelled with escapes is replaced in place, spelling kept.
	r = h.post("/r/raw/v1/chat/completions", `{"\u006dodel":"x","\u0079":1}`)
	if r.Status != 201 || string(h.up.Calls()[2].Body) != `{"\u006dodel":"raw-upstream-model","\u0079":1}` {
		t.Errorf("escaped names: %d %s", r.Status, h.up.Calls()[2].Body)
	}
	// Without a model member, one is added.
	r = h.post("/r/raw/v1/chat/completions", `{"x":1}`)
	if r.Status != 201 || string(h.up.Calls()[3].Body) != `{"x":1,"model":"raw-upstream-model"}` {
		t.Errorf("no model: %d %s", r.Status, h.up.Calls()[3].Body)
	}
}

func TestPassthroughStreamsEventByEvent(t *testing.T) {
	ack := make(chan struct{})
	var early atomic.Bool
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fl := w.(http.Flusher)
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		fl.Flush()
		// Send the second event only once the client has the first: if the
		// proxy buffered, the client would never get it in time.
		select {
		case <-ack:
		case <-time.After(1500 * time.Millisecond):
			early.Store(true)
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"n\":2}\n\n")
		fl.Flush()
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	}, cfg{})
	resp := h.openStream(t, "raw")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	var got []string
	first, err := readEvent(br)
	if err != nil {
		t.Fatalf("first event: %v", err)
	}
	got = append(got, first)
	close(ack)
	for {
		ev, err := readEvent(br)
		if ev != "" {
			got = append(got, ev)
		}
		if err != nil {
			break
		}
	}
	if early.Load() {
		t.Error("the client did not get event 1 before the upstream sent event 2 (buffered)")
	}
	if want := []string{`{"n":1}`, `{"n":2}`, `[DONE]`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
	if c := h.up.Calls()[0]; string(c.Body) != `{"model":"raw-upstream-model","stream":true}` {
		t.Errorf("upstream body %s", c.Body)
	}
}

// startHung sends body to the front in the background; the upstream
// handler reports the request, then waits for its context to end.
func startHung(t *testing.T, h *harness, ctx context.Context, body string) <-chan error {
	t.Helper()
	return startHungAt(t, h, ctx, "/v1/chat/completions", body)
}

// startHungAt is startHung on path.
func startHungAt(t *testing.T, h *harness, ctx context.Context, path, body string) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", h.front.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := h.client.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	return errc
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		stream     bool // the upstream sends a first event, then hangs
	}{
		{"passthrough", `{"model":"raw","stream":false}`, false},
		{"passthrough mid-stream", `{"model":"raw","stream":true}`, true},
		{"contract route", `{"model":"slow","messages":[` + userHi + `]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := noLeaks(t)
			got := make(chan struct{}, 1)
			gone := make(chan struct{}, 1)
			h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(200)
					fmt.Fprint(w, "data: {\"n\":1}\n\n")
					w.(http.Flusher).Flush()
				}
				got <- struct{}{}
				select {
				case <-r.Context().Done():
					gone <- struct{}{}
				case <-time.After(5 * time.Second):
				}
			}, cfg{})
			ctx, cancel := context.WithCancel(context.Background())
			errc := startHung(t, h, ctx, tc.body)
			select {
			case <-got:
			case <-time.After(3 * time.Second):
				t.Fatal("upstream never got the request")
			}
			cancel()
			select {
			case <-gone:
			case <-time.After(3 * time.Second):
				t.Fatal("client disconnect did not cancel the upstream call")
			}
			<-errc
			// The request is still audited.
			ev := h.sink.waitEvent(t, "")
			if ev.Status != 499 {
				t.Errorf("audit status %d outcome %s, want 499", ev.Status, ev.Outcome)
			}
			h.Close()
			check()
		})
	}
}

func TestPassthroughUpstreamFailures(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		// raw-fast's upstream times out after 200ms: 504, not an empty 200.
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) { h0hang(r) }, cfg{UpTimeout: "200ms"})
		start := time.Now()
		r := h.post("", `{"model":"raw-fast"}`)
		wantError(t, r, 504, "upstream_error", "upstream_timeout", nil)
		if time.Since(start) > 2*time.Second {
			t.Errorf("took %v", time.Since(start))
		}
		ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
		if ev.Outcome != "upstream_error" || ev.Status != 504 {
			t.Errorf("audit %+v", ev)
		}
	})
	t.Run("request_timeout", func(t *testing.T) {
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) { h0hang(r) }, cfg{RequestTimeout: "300ms"})
		r := h.post("", `{"model":"raw"}`)
		wantError(t, r, 504, "upstream_error", "upstream_timeout", nil)
	})
	t.Run("connection reset", func(t *testing.T) {
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			conn := hijack(w)
			conn.Close()
		}, cfg{})
		r := h.post("", `{"model":"raw"}`)
		wantError(t, r, 502, "upstream_error", "upstream_error", nil)
		if bytes.Contains(r.Body, []byte(upstreamKey)) {
			t.Error("key in error")
		}
	})
	t.Run("healthy stream longer than the upstream timeout is relayed whole", func(t *testing.T) {
		// raw-fast's upstream timeout is 200ms; it bounds the wait for
		// headers, not the stream (request_timeout does).
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			for i := 1; i <= 4; i++ {
				fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(120 * time.Millisecond)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		}, cfg{})
		resp, b, err := h.rawStream(t)
		if err != nil || !strings.Contains(string(b), `{"n":4}`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Errorf("stream cut: %q, %v", b, err)
		}
		if ev := h.sink.waitEvent(t, resp.Header.Get("X-Request-Id")); ev.Outcome != "passthrough" || ev.Status != 200 {
			t.Errorf("audit %+v", ev)
		}
	})
	t.Run("stream cut by request_timeout", func(t *testing.T) {
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			fmt.Fprint(w, "data: {\"n\":1}\n\n")
			w.(http.Flusher).Flush()
			h0hang(r)
		}, cfg{RequestTimeout: "500ms"})
		// Event 1, then an error event (the stream ends well-formed and
		// the SDKs raise it), never a clean end that looks finished.
		resp, b, err := h.rawStream(t)
		if err != nil || !strings.HasPrefix(string(b), "data: {\"n\":1}\n\ndata: {\"error\":") || !strings.Contains(string(b), `"code":"upstream_timeout"`) {
			t.Errorf("want event 1 then an upstream_timeout error event, got %q, %v", b, err)
		}
		ev := h.sink.waitEvent(t, resp.Header.Get("X-Request-Id"))
		if ev.Outcome != "upstream_error" || ev.Status != 200 || ev.ErrorCode != "upstream_timeout" {
			t.Errorf("audit %+v", ev)
		}
	})
	t.Run("upstream status relayed", func(t *testing.T) {
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 429, []byte(`{"error":{"message":"slow down"}}`))
		}, cfg{})
		r := h.post("", `{"model":"raw"}`)
		if r.Status != 429 || string(r.Body) != `{"error":{"message":"slow down"}}` || h.up.Hits() != 1 {
			t.Errorf("status %d hits %d body %s", r.Status, h.up.Hits(), r.Body)
		}
	})
}

func h0hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(3 * time.Second):
	}
}

// The audit event is handed to the sink before the response completes, so
// a client that has read the whole reply always finds it. An
// upstream Content-Length would otherwise let the client finish first.
func TestPassthroughAuditBeforeResponseCompletes(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		body := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		reply(w, 200, []byte(body))
	}, cfg{})
	for i := 0; i < 200; i++ {
		r := h.post("", `{"model":"raw","messages":[{"role":"user","content":"hi"}]}`)
		if r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
		id := r.Header.Get("X-Request-Id")
		found := false
		for _, ev := range h.sink.Events() {
			if ev.RequestID == id {
				found = true
			}
		}
		if !found {
			t.Fatalf("request %d: response read completely before its audit event was written", i)
		}
	}
}

// Passthrough changes only model and Authorization: the client's
// Accept-Encoding reaches the upstream and a compressed reply is relayed as
// sent.
func TestPassthroughKeepsAcceptEncoding(t *testing.T) {
	const body = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if r.Header.Get("Accept-Encoding") != "gzip" {
			reply(w, 400, []byte(`{"error":{"message":"Accept-Encoding not forwarded"}}`))
			return
		}
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write([]byte(body))
		zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.Write(zb.Bytes())
	}, cfg{})
	req, _ := http.NewRequest("POST", h.front.URL+"/v1/chat/completions", strings.NewReader(`{"model":"raw","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Accept-Encoding", "gzip")
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("status %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(zr)
	if string(got) != body {
		t.Errorf("relayed %q", got)
	}
}

// A passthrough reply of known length is relayed without a flush per read
// (net/http sends it in one write when the handler returns); an event
// stream is flushed event by event.
func TestPassthroughFlushesOnlyStreams(t *testing.T) {
	const body = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if strings.Contains(string(c.Body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			for i := range 3 {
				fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		reply(w, 200, []byte(body))
	}, cfg{})
	handler := h.srv.Handler(nil)
	for _, tt := range []struct {
		req        string
		maxFlushes int
		minFlushes int
	}{
		{`{"model":"raw","messages":[]}`, 0, 0},
		{`{"model":"raw","stream":true}`, 100, 1}, // events read together flush together
	} {
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(tt.req))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		rec := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
		handler.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("%s: status %d %s", tt.req, rec.Code, rec.Body)
		}
		if rec.flushes < tt.minFlushes || rec.flushes > tt.maxFlushes {
			t.Errorf("%s: %d flushes, want %d..%d", tt.req, rec.flushes, tt.minFlushes, tt.maxFlushes)
		}
		if tt.maxFlushes == 0 && (rec.Body.String() != body || rec.Header().Get("Content-Length") != "") {
			t.Errorf("relayed %q with Content-Length %q", rec.Body, rec.Header().Get("Content-Length"))
		}
	}
}

// openStream posts a stream request for model with the client key and
// returns the response, its body unread (closed when the test ends).
func (h *harness) openStream(t *testing.T, model string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", h.front.URL+"/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// rawStream reads raw-fast's stream to the end; err is what ended the
// read (nil: the stream ended cleanly).
func (h *harness) rawStream(t *testing.T) (*http.Response, []byte, error) {
	t.Helper()
	resp := h.openStream(t, "raw-fast")
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, err
}

// An error body in an encoding that cannot be scanned for keys is replaced
// by an envelope of its own; the encoding's name is quoted as sent
// (no HTML escaping).
func TestRedactBodyWithholdsUnknownEncoding(t *testing.T) {
	for _, tc := range []struct{ enc, want string }{
		{"br", `{"error":{"message":"upstream error body withheld: it could not be checked for secrets (Content-Encoding br)","type":"upstream_error","code":"upstream_error","param":null}}`},
		{`x<&>"y`, `{"error":{"message":"upstream error body withheld: it could not be checked for secrets (Content-Encoding x<&>\"y)","type":"upstream_error","code":"upstream_error","param":null}}`},
	} {
		resp := &http.Response{Header: http.Header{"Content-Encoding": {tc.enc}}, Body: io.NopCloser(strings.NewReader("\x00\x01 sk-secret"))}
		if err := redactBody(resp); err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		if string(got) != tc.want || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: body %s, headers %v", tc.enc, got, resp.Header)
		}
	}
}

// writeCounter counts the writes made on a connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// countUpstreamWrites gives the harness's caller a transport whose
// connections count their writes.
func countUpstreamWrites(t *testing.T, h *harness) *atomic.Int32 {
	writes := new(atomic.Int32)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, writes: writes}, nil
	}
	h.caller.Client = &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return writes
}

// The forwarded request goes out in one write: request line, headers and
// body together (net/http flushes the headers on their own, a second
// syscall, unless it knows the body is in memory).
func TestPassthroughSendsRequestInOneWrite(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, []byte(`{"ok":true}`))
	}, cfg{})
	writes := countUpstreamWrites(t, h)
	for i := range 3 {
		writes.Store(0)
		r := h.post("/r/raw/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"`+strings.Repeat("a", 500)+`"}]}`)
		if r.Status != 200 {
			t.Fatalf("status %d %s", r.Status, r.Body)
		}
		if n := writes.Load(); n != 1 {
			t.Errorf("request %d: %d writes to the upstream, want 1", i, n)
		}
	}
}

// doneEvents records the finished audit events telemetry receives.
type doneEvents struct {
	nopTelemetry
	mu  sync.Mutex
	evs []audit.Event
}

func (d *doneEvents) RequestDone(_ context.Context, ev *audit.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.evs = append(d.evs, *ev)
}

// With a sink that drops every event (sink none) neither route hashes or
// copies its input, which only the audit line would show; with a sink
// that keeps them, both do.
func TestInputHashOnlyForAKeepingSink(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{IncludeContent: true})
	none, err := audit.New(audit.SinkNone, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sink audit.Sink
		keep bool
	}{{"sink none", none, false}, {"a keeping sink", h.sink, true}} {
		tel := &doneEvents{}
		h.srv.Audit, h.srv.Telemetry = c.sink, tel
		for _, path := range []string{"", respPath, "/r/raw-fast/v1/chat/completions"} {
			body := `{"model":"free","messages":[{"role":"user","content":"q"}]}`
			if path == respPath {
				body = `{"model":"free","input":"q"}`
			}
			if r := h.post(path, body); r.Status != 200 {
				t.Fatalf("%s %s: status %d %s", c.name, path, r.Status, r.Body)
			}
		}
		tel.mu.Lock()
		if len(tel.evs) != 3 {
			t.Fatalf("%s: %d events", c.name, len(tel.evs))
		}
		for _, ev := range tel.evs {
			if hashed := ev.InputSHA256 != "" && len(ev.Input) > 0; hashed != c.keep || !c.keep && (ev.InputSHA256 != "" || ev.Input != nil) {
				t.Errorf("%s, route %s: input_sha256 %q, input %s", c.name, ev.Route, ev.InputSHA256, ev.Input)
			}
		}
		tel.mu.Unlock()
	}
}
