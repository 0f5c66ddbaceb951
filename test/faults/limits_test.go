package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// request_timeout follows reloads; the write deadline is set per
// request. Before, the server-wide WriteTimeout was computed once at start
// from the first config's request_timeout, so a request that a reload had
// allowed to run longer got an empty reply while the audit said 200.
// The first config's write deadline (1 s + 1 s) falls before the upstream's
// answer (2.5 s), so only a deadline that follows the reload lets the second
// request through; the 1 s of grace is the time the first request's 504 has
// to be written once its request_timeout ends (100 ms was too short under
// load: the 504 was cut and the client read EOF).
func TestReloadRaisesRequestTimeout(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, slowOK(2500*time.Millisecond))
	to := testTimeouts
	to.Write = time.Second // the write deadline: request_timeout + 1s
	e := newEnv(t, up.URL(), opts{RequestTimeout: "1s", UpTimeout: "5s"}, &to)
	r := e.post(context.Background(), askC)
	wantError(t, r, 504, "upstream_error", "upstream_timeout")

	e.reload(opts{RequestTimeout: "4s", UpTimeout: "5s", BodyReadTimeout: to.Read.String()})
	r = e.post(context.Background(), askC)
	wantOK(t, r)
	if r.Elapsed < 2400*time.Millisecond {
		t.Errorf("took %v: the upstream answers after 2.5 s", r.Elapsed)
	}
	evs := e.audit.waitEvents(t, 2)
	if evs[1].Status != 200 {
		t.Errorf("audit %+v", evs[1])
	}
}

// A body read deadline (body_read_timeout) bounds the body only: an
// exchange that runs past it once the body is in is not cut (net/http's
// watch for the client leaving must not fail at the body's deadline).
func TestExchangeOutlivesBodyReadTimeout(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, slowOK(900*time.Millisecond))
	e := newEnv(t, up.URL(), opts{UpTimeout: "5s", BodyReadTimeout: "300ms"}, &testTimeouts)
	for _, body := range []string{askC, askP} {
		r := e.post(context.Background(), body)
		wantOK(t, r)
	}
}

// a body not read within body_read_timeout gets 408
// request_timeout when the client is still there.
func TestBodyReadTimeout(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	e := newEnv(t, up.URL(), opts{BodyReadTimeout: "300ms"}, &testTimeouts)
	c := slowConn(t, e)
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", keyAlpha, len(askC), askC[:10])
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 408 || !strings.Contains(string(b), `"code":"request_timeout"`) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("answered after %v, want about body_read_timeout", d)
	}
	if ev := e.audit.waitEvents(t, 1)[0]; ev.Status != 408 || ev.Outcome != "rejected" {
		t.Errorf("audit %+v", ev)
	}
	if up.Hits() != 0 {
		t.Error("a body that never arrived reached the upstream")
	}
}

// bodies that would take the in-flight total over
// max_inflight_bytes wait up to 1 s for room, then get 503 server_busy
// with Retry-After: 1; once room is made, requests go through again.
func TestInflightBudget(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	e := newEnv(t, up.URL(), opts{MaxInflight: "8192", BodyReadTimeout: "5s"}, &testTimeouts)
	// Two uploads that announce 4 KiB each and send 10 bytes hold the
	// whole budget.
	var holders []net.Conn
	for i := 0; i < 2; i++ {
		c := slowConn(t, e)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 4096\r\n\r\n{\"model\":", keyAlpha)
		holders = append(holders, c)
	}
	deadline := time.Now().Add(2 * time.Second)
	for e.srv.LimitStats().InflightBytes < 8192 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.srv.LimitStats().InflightBytes; got != 8192 {
		t.Fatalf("in flight %d, want 8192", got)
	}
	start := time.Now()
	r := e.post(context.Background(), askC)
	wantError(t, r, 503, "server_error", "server_busy")
	if r.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 2500*time.Millisecond {
		t.Errorf("refused after %v, want after waiting about 1 s", d)
	}
	if n := e.srv.LimitStats().RefusedBusy; n != 1 {
		t.Errorf("refused busy %d, want 1", n)
	}
	// A request that arrives while full and gets room within the second
	// waits and goes through.
	var wg sync.WaitGroup
	var waited *result
	wg.Go(func() { ; waited = e.post(context.Background(), askC) })
	time.Sleep(300 * time.Millisecond)
	holders[0].Close() // leaves mid-upload: its 4 KiB go back
	wg.Wait()
	wantOK(t, waited)
	holders[1].Close()
	deadline = time.Now().Add(2 * time.Second)
	for e.srv.LimitStats().InflightBytes != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.srv.LimitStats().InflightBytes; got != 0 {
		t.Errorf("in flight %d after every request ended", got)
	}
	evs := e.audit.waitEvents(t, 4)
	codes := map[int]int{}
	for _, ev := range evs {
		codes[ev.Status]++
	}
	if codes[503] != 1 || codes[200] != 1 || codes[499] != 2 {
		t.Errorf("audited statuses %v, want one 503, one 200, two 499", codes)
	}
}

// at max_connections, further connections wait (in the kernel's
// backlog) until one closes; they are then served.
func TestMaxConnections(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	to := testTimeouts
	to.ReadHeader = 10 * time.Second // the two holders send nothing
	e := newEnv(t, up.URL(), opts{MaxConnections: "2"}, &to)
	// Two connections that send nothing fill the cap.
	a, b := slowConn(t, e), slowConn(t, e)
	_, _ = a, b
	deadline := time.Now().Add(2 * time.Second)
	for e.srv.LimitStats().Connections < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := e.srv.LimitStats().Connections; n != 2 {
		t.Fatalf("open %d, want 2", n)
	}
	done := make(chan *result, 1)
	go func() { done <- e.post(context.Background(), askC) }()
	select {
	case r := <-done:
		t.Fatalf("a third connection was served at the cap: %d %v", r.Status, r.Err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := e.srv.LimitStats().Connections; n != 2 {
		t.Errorf("open %d at the cap", n)
	}
	a.Close()
	select {
	case r := <-done:
		wantOK(t, r)
	case <-time.After(3 * time.Second):
		t.Fatal("the waiting connection was not served after one closed")
	}
}
