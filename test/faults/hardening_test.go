package faults

// Hostile or careless clients: keys, floods, oversized and slow requests.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
)

func TestAuth(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	e := newEnv(t, up.URL(), opts{Keys: true}, nil)
	bad := []string{
		"Authorization:",                                      // none
		"Authorization: Bearer ",                              // empty
		"Authorization: Bearer ck-wrong-key-SECRET",           // wrong
		"Authorization: Bearer " + keyAlpha[:len(keyAlpha)-1], // a prefix
		"Authorization: Bearer " + keyAlpha + "x",             // an extension
		"Authorization: Bearer " + keyAlpha + "," + keyBeta,   // the raw list
		"Authorization: Basic " + keyAlpha,
		"Authorization: Bearer " + upstreamKey, // the upstream's key is not a client key
	}
	for _, h := range bad {
		r := e.post(context.Background(), askC, h)
		wantError(t, r, 401, "authentication_error", "invalid_api_key")
	}
	for _, k := range []string{keyAlpha, keyBeta} {
		wantOK(t, e.post(context.Background(), askC, "Authorization: Bearer "+k))
	}
	// Auth comes first: an unauthenticated oversized or malformed body is
	// a 401, never a 413 or 400 (those would tell a stranger about the
	// route's limits), and never reaches the upstream.
	hits := up.Hits()
	wantError(t, e.post(context.Background(), strings.Repeat("x", 10000), "Authorization:"), 401, "authentication_error", "invalid_api_key")
	wantError(t, e.post(context.Background(), "{", "Authorization: Bearer nope"), 401, "authentication_error", "invalid_api_key")
	if up.Hits() != hits {
		t.Errorf("an unauthenticated request reached the upstream")
	}
	// The models list and /metrics on listen need a key too; health does not.
	for _, path := range []string{"/v1/models", "/r/c/v1/models", "/metrics"} {
		resp, err := e.client.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("GET %s without a key: %d, want 401", path, resp.StatusCode)
		}
	}
	// The upstream gets its own key, never the client's.
	for _, a := range up.auths() {
		if a != "Bearer "+upstreamKey {
			t.Errorf("upstream saw Authorization %q", a)
		}
	}
	wantNoSecrets(t, e)
}

// wantNoSecrets checks that no client or upstream key reached the logs or
// the audit (no secret is ever written anywhere).
func wantNoSecrets(t *testing.T, e *env) {
	t.Helper()
	for where, text := range map[string]string{"logs": e.logs.String(), "audit": e.audit.String()} {
		for _, secret := range []string{"SECRET", keyAlpha, keyBeta, upstreamKey} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain a secret (%q):\n%s", where, secret, text)
			}
		}
	}
}

func TestRateLimit(t *testing.T) {
	t.Run("per key", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, okHandler)
		e := newEnv(t, up.URL(), opts{Keys: true, RateLimit: "{requests_per_second: 2, burst: 3}"}, nil)
		for i := 0; i < 3; i++ {
			wantOK(t, e.post(context.Background(), askC))
		}
		r := e.post(context.Background(), askC)
		wantError(t, r, 429, "rate_limit_error", "rate_limit_exceeded")
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 2 {
			t.Errorf("Retry-After %q, want 1 (seconds until a token)", r.Header.Get("Retry-After"))
		}
		// Another key has its own bucket.
		wantOK(t, e.post(context.Background(), askC, "Authorization: Bearer "+keyBeta))
		// A wrong key is refused by auth first, and does not spend tokens.
		wantError(t, e.post(context.Background(), askC, "Authorization: Bearer nope"), 401, "authentication_error", "invalid_api_key")
		// Refills at requests_per_second.
		time.Sleep(600 * time.Millisecond)
		wantOK(t, e.post(context.Background(), askC))
		if up.Hits() != 5 {
			t.Errorf("upstream hits %d, want 5 (a limited request never reaches it)", up.Hits())
		}
		evs := e.audit.waitEvents(t, 7)
		n429 := 0
		for _, ev := range evs {
			if ev.Status == 429 {
				n429++
				if ev.Outcome != "rejected" {
					t.Errorf("429 audited as %s", ev.Outcome)
				}
			}
		}
		if n429 != 1 {
			t.Errorf("%d audited 429s, want 1", n429)
		}
		wantNoSecrets(t, e)
	})
	t.Run("same key, other spelling", func(t *testing.T) {
		// "Bearer  k" (two spaces) authenticates as k, so it must spend k's
		// tokens: a per-key limit that a client can reset by changing the
		// whitespace in its header is no limit.
		noLeaks(t)
		up := newUpstream(t, okHandler)
		e := newEnv(t, up.URL(), opts{Keys: true, RateLimit: "{requests_per_second: 0.1, burst: 1}"}, nil)
		wantOK(t, e.post(context.Background(), askC))
		r := e.post(context.Background(), askC, "Authorization: Bearer  "+keyAlpha)
		if r.Status == 200 {
			t.Error("proxy/ratelimit.go keys buckets by the raw Authorization header " +
				"(TrimPrefix \"Bearer \") while authenticate TrimSpaces it: \"Bearer  <key>\" gets a fresh bucket")
		}
		wantError(t, r, 429, "rate_limit_error", "rate_limit_exceeded")
	})
	t.Run("no keys: one shared bucket", func(t *testing.T) {
		// Without client keys (auth off) everyone shares one bucket
		// (proxy/ratelimit.go's own contract); an arbitrary Authorization
		// header must not buy a fresh one.
		noLeaks(t)
		up := newUpstream(t, okHandler)
		e := newEnv(t, up.URL(), opts{RateLimit: "{requests_per_second: 0.1, burst: 1}"}, nil)
		wantOK(t, e.post(context.Background(), askC))
		r := e.post(context.Background(), askC, "Authorization: Bearer anything-at-all")
		if r.Status == 200 {
			t.Error("with auth off, proxy/ratelimit.go keys buckets by whatever Authorization " +
				"header the client sends, so any client gets a fresh bucket per made-up header")
		}
		wantError(t, r, 429, "rate_limit_error", "rate_limit_exceeded")
	})
}

func TestMaxConcurrency(t *testing.T) {
	t.Run("passthrough queue wait does not count against the upstream timeout", func(t *testing.T) {
		// Upstream timeout 1s, each call 500ms, cap 1: the fourth request
		// queues ~1.5s for the slot. Queueing is bounded by request_timeout
		// (5s), as on contract routes; the upstream timeout starts with the
		// call. (A call half the timeout leaves room for a loaded machine.)
		noLeaks(t)
		up := newUpstream(t, slowOK(500*time.Millisecond))
		e := newEnv(t, up.URL(), opts{MaxConcurrency: 1, UpTimeout: "1s"}, nil)
		for _, r := range e.postAll(askP, askP, askP, askP) {
			wantOK(t, r)
		}
		if p := up.Peak(); p != 1 {
			t.Errorf("peak upstream concurrency %d with max_concurrency 1", p)
		}
	})
	t.Run("passthrough calls too", func(t *testing.T) {
		// max_concurrency is "a cap on concurrent calls to this upstream"
		// (docs/config.md); passthrough routes call the same upstream.
		// The upstream timeout is far above a call's 60ms: this is about
		// the cap. At the default 300ms a loaded machine (-race, other
		// packages) timed calls out: a passthrough call then fails (it is
		// not retried), and a contract call's retry overlaps the timed-out
		// call still running in the fake, so it counted 3.
		noLeaks(t)
		up := newUpstream(t, slowOK(60*time.Millisecond))
		e := newEnv(t, up.URL(), opts{MaxConcurrency: 2, UpTimeout: "3s"}, nil)
		for i, r := range e.postAll(askC, askP, askC, askP, askC, askP, askC, askP) {
			if r.Err != nil || r.Status != 200 {
				t.Errorf("request %d: status %d, error %v, body %s", i, r.Status, r.Err, r.Body)
			}
		}
		if p := up.Peak(); p > 2 {
			t.Errorf("peak upstream concurrency %d with max_concurrency 2: passthrough "+
				"(proxy/passthrough.go) calls the upstream through Caller.Client.Transport and never takes the "+
				"upstream's slot (proxy/limit.go is only used by Caller.Call)", p)
		}
	})
	t.Run("contract calls", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, slowOK(60*time.Millisecond))
		e := newEnv(t, up.URL(), opts{MaxConcurrency: 2}, nil)
		for _, r := range e.postAll(askC, askC, askC, askC, askC, askC, askC, askC) {
			wantOK(t, r)
		}
		if p := up.Peak(); p > 2 {
			t.Errorf("peak upstream concurrency %d, want <= max_concurrency 2", p)
		}
		if p := up.Peak(); p < 2 {
			t.Logf("peak upstream concurrency %d (the cap was never reached)", p)
		}
	})
	t.Run("queue wait is bounded by request_timeout", func(t *testing.T) {
		noLeaks(t)
		up := newHangingUpstream(t)
		e := newEnv(t, up.URL(), opts{MaxConcurrency: 1, UpTimeout: "10s", RequestTimeout: "300ms", MaxRetries: -1}, nil)
		res := e.postAll(askC, askC, askC)
		for _, r := range res {
			wantError(t, r, 504, "upstream_error", "upstream_timeout")
		}
		// The others waited for the slot. A queued request may still get it
		// in the moment between the holder's deadline and its own; the fake
		// then briefly counts two calls, because contractd frees the slot
		// when its call is cancelled and the fake's handler notices that a
		// little later. Without a cap all three would overlap. (The cap
		// itself is asserted exactly above, where calls end normally.)
		if p := up.Peak(); p > 2 {
			t.Errorf("peak upstream concurrency %d with max_concurrency 1", p)
		}
		for _, r := range res {
			if r.Elapsed > 2*time.Second {
				t.Errorf("a queued request took %v, want about request_timeout", r.Elapsed)
			}
		}
	})
}

func TestBodyLimit(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	e := newEnv(t, up.URL(), opts{MaxBody: 4096}, nil)
	pad := func(n int) string {
		// A valid request padded with a vendor field to n bytes.
		base := `{"model":"c","messages":[{"role":"user","content":"hi"}],"x_pad":""}`
		return strings.Replace(base, `"x_pad":""`, `"x_pad":"`+strings.Repeat("a", n-len(base))+`"`, 1)
	}
	wantOK(t, e.post(context.Background(), pad(4096)))
	wantError(t, e.post(context.Background(), pad(4097)), 413, "invalid_request_error", "request_too_large")
	wantError(t, e.post(context.Background(), pad(1<<20)), 413, "invalid_request_error", "request_too_large")
	// Without a Content-Length (chunked), the limit holds while reading.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", io.MultiReader(strings.NewReader(pad(8000))))
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+keyAlpha)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "request_too_large") {
		t.Errorf("chunked oversized body: %d %s", resp.StatusCode, b)
	}
	// A lying Content-Length (says small, sends more) cannot smuggle more
	// than the limit either; net/http reads exactly Content-Length bytes.
	if up.Hits() != 1 {
		t.Errorf("upstream hits %d, want 1", up.Hits())
	}
}

func TestHeaderLimit(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	e := newEnv(t, up.URL(), opts{}, &testTimeouts)
	// Within serve.go's MaxHeaderBytes: fine.
	wantOK(t, e.post(context.Background(), askC, "X-Big: "+strings.Repeat("a", 32<<10)))
	// Past it: 431 from net/http, before any handler runs.
	r := e.post(context.Background(), askC, "X-Big: "+strings.Repeat("a", 128<<10))
	if r.Err == nil && r.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized headers: %d, want 431", r.Status)
	}
	// Many headers, each small, count the same.
	hdr := []string{}
	for i := 0; i < 3000; i++ {
		hdr = append(hdr, fmt.Sprintf("X-H-%d: %s", i, strings.Repeat("b", 40)))
	}
	r = e.post(context.Background(), askC, hdr...)
	if r.Err == nil && r.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("many headers: %d, want 431", r.Status)
	}
	if up.Hits() != 1 {
		t.Errorf("upstream hits %d, want 1", up.Hits())
	}
}

// slowConn opens a raw connection to the hardened server.
func slowConn(t *testing.T, e *env) net.Conn {
	t.Helper()
	return rawConn(t, strings.TrimPrefix(e.url, "http://"))
}

// rawConn opens a connection to addr, closed when the test ends.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// trickle writes s one byte per gap until the server closes the
// connection; it reports how long the server put up with it.
func trickle(c net.Conn, s string, gap time.Duration) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < len(s); i++ {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return time.Since(start), nil
		}
		time.Sleep(gap)
		// A closed connection shows on read first: a response or EOF.
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return time.Since(start), nil
			}
		} else {
			return time.Since(start), nil // the server answered (and will close)
		}
	}
	return time.Since(start), errors.New("the server read the whole trickle")
}

func TestSlowClients(t *testing.T) {
	to := testTimeouts
	t.Run("slow headers", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, okHandler)
		to := to
		to.ReadHeader = time.Second // long enough to tell "served beside them" from "served after them"
		e := newEnv(t, up.URL(), opts{}, &to)
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyAlpha + "\r\n" +
			strings.Repeat("X-Slow: yes\r\n", 20) + "\r\n"
		// 30 slowloris connections at once…
		var wg sync.WaitGroup
		held := make([]time.Duration, 30)
		errs := make([]error, 30)
		for i := range held {
			c := slowConn(t, e)
			wg.Go(func() { ; held[i], errs[i] = trickle(c, head, 20*time.Millisecond) })
		}
		// …do not stop a normal client.
		time.Sleep(100 * time.Millisecond)
		r := e.post(context.Background(), askC)
		wantOK(t, r)
		if r.Elapsed > 700*time.Millisecond {
			t.Errorf("a normal request took %v beside slowloris clients", r.Elapsed)
		}
		wg.Wait()
		for i := range held {
			if errs[i] != nil || held[i] > to.ReadHeader+500*time.Millisecond {
				t.Errorf("slow-header conn %d held %v (%v), want cut at ReadHeaderTimeout %v", i, held[i], errs[i], to.ReadHeader)
			}
		}
	})
	t.Run("slow body", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, okHandler)
		e := newEnv(t, up.URL(), opts{}, &to)
		c := slowConn(t, e)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", keyAlpha, len(askC))
		held, err := trickle(c, askC, 20*time.Millisecond)
		if err != nil || held > to.Read+500*time.Millisecond {
			t.Errorf("slow-body conn held %v (%v), want cut at ReadTimeout %v", held, err, to.Read)
		}
		if up.Hits() != 0 {
			t.Errorf("a request whose body never arrived reached the upstream")
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, okHandler)
		e := newEnv(t, up.URL(), opts{}, &to)
		c := slowConn(t, e)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", keyAlpha, len(askC), askC)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("unexpected byte on an idle connection")
		}
		if d := time.Since(start); d > to.Idle+500*time.Millisecond {
			t.Errorf("idle connection held %v, want closed at IdleTimeout %v", d, to.Idle)
		}
	})
	t.Run("client that never reads", func(t *testing.T) {
		// A passthrough reply larger than every socket buffer to a client
		// that reads nothing: WriteTimeout ends the handler, and the
		// upstream call with it.
		noLeaks(t)
		big := completion(strings.Repeat("y", 16<<20))
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) { reply(w, 200, big) })
		short := to
		short.Write = 500 * time.Millisecond
		e := newEnv(t, up.URL(), opts{UpTimeout: "30s", RequestTimeout: "1s"}, &short)
		c := slowConn(t, e)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", keyAlpha, len(askP), askP)
		start := time.Now()
		evs := e.audit.waitEvents(t, 1) // the handler ended
		t.Logf("handler ended after %v: audit status %d outcome %s", time.Since(start), evs[0].Status, evs[0].Outcome)
		if evs[0].Outcome == "passthrough" {
			t.Errorf("a reply the client never received is audited as a complete passthrough")
		}
	})
}

// TestServeHardening runs the binary, so that what the rest of this suite
// proves in process (with the limits scaled down) holds for what operators
// deploy: cmd/contractd serve puts both listeners behind the hardened
// http.Server and the per-request deadlines, and the API one behind
// max_connections.
func TestServeHardening(t *testing.T) {
	noLeaks(t)
	bin := testkit.BuildContractd(t)
	up := newUpstream(t, okHandler)
	free := testkit.FreeAddrs(t, 2)
	api, admin := free[0], free[1]
	path := filepath.Join(t.TempDir(), "contractd.yaml")
	y := configYAML(up.URL(), opts{Listen: api, AdminListen: admin, BodyReadTimeout: "500ms", MaxConnections: "2"})
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.StartDaemon(t, bin, path, []string{"FAULTS_UPSTREAM_KEY=" + upstreamKey}, api, admin)

	// Slow headers, on both listeners: started first (the full-scale
	// header timeout is 10 s) and checked last. At one byte per 100 ms the
	// head would take 30 s to arrive.
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Slow: yes\r\n", 20) + "\r\n"
	type hold struct {
		d   time.Duration
		err error
	}
	holders := map[string]chan hold{}
	for _, addr := range []string{api, admin} {
		c := rawConn(t, addr)
		ch := make(chan hold, 1)
		go func() { d, err := trickle(c, head, 100*time.Millisecond); ch <- hold{d, err} }()
		holders[addr] = ch
	}

	// Header size: within MaxHeaderBytes is served, past it is 431 before
	// any handler runs (net/http's own default would take 1 MiB).
	for _, l := range []struct{ name, addr, req string }{
		{"api", api, "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: " + fmt.Sprint(len(askC)) + "\r\n"},
		{"admin", admin, "GET /healthz HTTP/1.1\r\n"},
	} {
		for _, c := range []struct{ size, want int }{{32 << 10, 200}, {serveGoMaxHeaderBytes + 16<<10, 431}} {
			req := l.req + "Host: x\r\nConnection: close\r\nX-Big: " + strings.Repeat("a", c.size) + "\r\n\r\n"
			if l.name == "api" {
				req += askC
			}
			if got := rawStatus(t, l.addr, req); got != c.want {
				t.Errorf("%s listener, %d KiB header: status %d, want %d", l.name, c.size>>10, got, c.want)
			}
		}
	}

	// Per-request deadlines: a body trickled slower than body_read_timeout
	// (500 ms here) is cut there, on the admin listener too.
	for _, l := range []struct{ name, addr, path, body string }{
		{"api", api, "/v1/chat/completions", askC},
		{"admin", admin, "/admin/check", `{"route":"c","output":{"answer":"forty-two"}}`},
	} {
		c := rawConn(t, l.addr)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", l.path, len(l.body))
		held, err := trickle(c, l.body, 50*time.Millisecond)
		c.Close()
		if err != nil || held < 400*time.Millisecond || held > 1500*time.Millisecond {
			t.Errorf("%s listener: slow body held %v (%v), want cut at body_read_timeout 500ms", l.name, held, err)
		}
	}

	// max_connections 2 caps the API listener: the slow-header holder and
	// one idle connection fill it, and a request waits (in the kernel's
	// backlog, accepted in order) until one closes. The admin listener is
	// not capped: health checks must get through a flood.
	idle := rawConn(t, api)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(client.CloseIdleConnections)
	done := make(chan error, 1)
	go func() {
		resp, err := client.Post("http://"+api+"/v1/chat/completions", "application/json", strings.NewReader(askC))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a third API connection was served at max_connections 2 (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if got := rawStatus(t, admin, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); got != 200 {
		t.Errorf("admin /healthz with the API listener at its cap: %d", got)
	}
	idle.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the waiting request, once a connection closed: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiting request was not served after a connection closed")
	}

	for _, l := range []struct{ name, addr string }{{"api", api}, {"admin", admin}} {
		h := <-holders[l.addr]
		if h.err != nil || h.d < serveGoTimeouts.ReadHeader-time.Second || h.d > serveGoTimeouts.ReadHeader+2500*time.Millisecond {
			t.Errorf("%s listener: slow-header connection held %v (%v), want cut at the header timeout %v", l.name, h.d, h.err, serveGoTimeouts.ReadHeader)
		}
	}
}

// rawStatus writes req on a fresh connection to addr and returns the
// response's status (0 when none came). The response is read while the
// request is still being written: a server that refuses a request midway
// answers before it has read it all.
func rawStatus(t *testing.T, addr, req string) int {
	t.Helper()
	c := rawConn(t, addr)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	go func() { _, _ = c.Write([]byte(req)) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Logf("%s: no response: %v", addr, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeGoTimeoutsMirrored: this suite scales serve.go's limits down
// (testTimeouts), which proves the real server only while the full-scale
// values are the ones proxy.NewHTTPServer and the defaults have.
// TestServeHardening shows the binary serves through them.
func TestServeGoTimeoutsMirrored(t *testing.T) {
	hs := proxy.NewHTTPServer(nil)
	if hs.ReadHeaderTimeout != serveGoTimeouts.ReadHeader || hs.IdleTimeout != serveGoTimeouts.Idle || hs.MaxHeaderBytes != serveGoMaxHeaderBytes {
		t.Errorf("NewHTTPServer: %+v; this suite mirrors %+v", hs, serveGoTimeouts)
	}
	if hs.ReadTimeout != 0 || hs.WriteTimeout != 0 {
		t.Errorf("NewHTTPServer sets server-wide ReadTimeout %v / WriteTimeout %v: both are per request (reloads apply; a long exchange is not cut at a body deadline)", hs.ReadTimeout, hs.WriteTimeout)
	}
	if proxy.DefaultWriteGrace != serveGoTimeouts.Write || config.DefaultBodyReadTimeout != serveGoTimeouts.Read {
		t.Error("serveGoTimeouts drifted from proxy.DefaultWriteGrace / config.DefaultBodyReadTimeout")
	}
}

// An upstream that echoes the key it was sent (OpenAI masks it in its 401
// message; other OpenAI-compatible servers may not) must not get it to the
// client, the logs or the audit through contractd's 502 message.
func TestUpstreamEchoedKey(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 401, []byte(`{"error":{"message":"Incorrect API key provided: `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`","type":"invalid_request_error"}}`))
	})
	e := newEnv(t, up.URL(), opts{Keys: true}, nil)
	r := e.post(context.Background(), askC)
	wantError(t, r, 502, "upstream_error", "upstream_error")
	leaked := []string{}
	if strings.Contains(string(r.Body), upstreamKey) {
		leaked = append(leaked, "client response")
	}
	if strings.Contains(e.logs.String(), upstreamKey) {
		leaked = append(leaked, "logs")
	}
	if strings.Contains(e.audit.String(), upstreamKey) {
		leaked = append(leaked, "audit")
	}
	if len(leaked) > 0 {
		t.Errorf("an upstream error message that echoes the upstream key reaches the %s "+
			"(proxy/upstream.go upstreamMessage copies error.message, up to 300 bytes, into the 502 message and the logged cause)",
			strings.Join(leaked, ", "))
	}
}

// A client-chosen route name is copied into the log line and the audit
// event of its 404; it must be bounded there, or every request can write
// up to max_body_bytes into both.
func TestUnknownRouteNotAmplified(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	e := newEnv(t, up.URL(), opts{MaxBody: 1 << 20}, nil)
	r := e.post(context.Background(), `{"model":"`+strings.Repeat("A", 200_000)+`","messages":[]}`)
	wantError(t, r, 404, "invalid_request_error", "model_not_found")
	if len(r.Body) > 4096 {
		t.Errorf("404 body is %d bytes", len(r.Body))
	}
	e.audit.waitEvents(t, 1)
	if l, a := len(e.logs.String()), len(e.audit.String()); l > 8192 || a > 8192 {
		t.Errorf("a 200 kB unknown model name put %d bytes into the logs and %d into the audit "+
			"(proxy/server.go chat sets x.ev.Route to the client's name before the route lookup, unbounded)", l, a)
	}
}
