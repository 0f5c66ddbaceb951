package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// At max_connections, a keep-alive connection idle between requests gives
// its slot to a client waiting to connect; a connection in the middle of a
// request does not, and gives it once its request ends and it goes idle.
// Before, the new client waited for an idle connection to close, which
// takes the server's IdleTimeout (2 minutes in serve; never here).
func TestConnLimitClosesIdleForWaitingClient(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 1)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	l := &ConnLimit{Max: func() int { return 1 }}
	ts.Listener = l.Listener(ts.Listener)
	l.Track(ts.Config)
	ts.Start()
	defer ts.Close()

	// Each client has its own transport: its own keep-alive connection.
	get := func(tr *http.Transport, path string, wait time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	newTransport := func() *http.Transport {
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		t.Cleanup(tr.CloseIdleConnections)
		return tr
	}
	a, b, c := newTransport(), newTransport(), newTransport()

	// a's connection is open and idle: b is served at once.
	if err := get(a, "/", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := get(b, "/", 3*time.Second); err != nil {
		t.Fatalf("a second client at the cap with the only connection idle: %v", err)
	}
	waitConnsOpen(t, l, 1)

	// b's connection is now busy with a request: c waits for it ...
	held := make(chan error, 1)
	go func() { held <- get(b, "/hold", 10*time.Second) }()
	select {
	case <-started:
	case err := <-held:
		t.Fatalf("the held request ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the held request never reached the handler")
	}
	served := make(chan error, 1)
	go func() { served <- get(c, "/", 10*time.Second) }()
	select {
	case err := <-served:
		t.Fatalf("a client was served while the only connection was in the middle of a request (%v)", err)
	case err := <-held:
		t.Fatalf("the held request ended early: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// ... and gets it once b's request has ended and its connection is idle.
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the held request failed: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiting client was not served after the only connection went idle")
	}
	waitConnsOpen(t, l, 1)
}

func waitConnsOpen(t *testing.T, l *ConnLimit, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); l.Open() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Open() = %d, want %d", l.Open(), want)
		}
	}
}
