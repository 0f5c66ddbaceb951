package e2e

import (
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// While draining after SIGTERM the admin listener keeps
// answering, /readyz with 503 (so a load balancer stops sending), until
// the in-flight requests have ended; then the process exits 0.
func TestDrainKeepsAdminAnswering(t *testing.T) {
	t.Parallel()
	up, d := serveBase(t, t.TempDir())
	if st, _ := adminGet(t, d, "/readyz"); st != 200 {
		t.Fatalf("/readyz %d before SIGTERM, want 200", st)
	}
	done := make(chan int, 1)
	go func() {
		resp, _ := postNoFatal(d, reviewBody("review-slow", "Slow but tasty."))
		st := 0
		if resp != nil {
			st = resp.StatusCode
		}
		done <- st
	}()
	select {
	case <-up.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the upstream")
	}
	d.signal(syscall.SIGTERM)
	if _, ok := d.logLine(5*time.Second, msgIs("draining")); !ok {
		t.Fatal("no draining log line")
	}
	// The slow request is still at the upstream (slowDelay): the admin
	// listener answers meanwhile.
	var ready, reviews int
	if !waitFor(slowDelay/2, func() bool {
		ready, _ = adminGet(t, d, "/readyz")
		return ready == http.StatusServiceUnavailable
	}) {
		t.Fatalf("/readyz %d while draining, want 503", ready)
	}
	if reviews, _ = adminGet(t, d, "/admin/reviews"); reviews != 200 {
		t.Errorf("/admin/reviews %d while draining, want 200", reviews)
	}
	select {
	case st := <-done:
		t.Fatalf("the in-flight request ended (%d) before the admin checks; the test proves nothing", st)
	default:
	}
	if st := <-done; st != 200 {
		t.Errorf("in-flight request %d, want 200", st)
	}
	if code := d.wait(10 * time.Second); code != 0 {
		t.Fatalf("exit code %d after a clean drain, want 0", code)
	}
	if _, err := http.Get("http://" + d.Admin + "/readyz"); err == nil {
		t.Error("the admin listener still answers after exit")
	}
}

// max_connections caps the API listener only: with its one connection
// held open, the admin listener still answers (a health check never
// queues behind client traffic), and the API serves the next connection
// once the first closes.
func TestMaxConnectionsLeavesAdminAlone(t *testing.T) {
	t.Parallel()
	d := startOneConnection(t)
	held, err := net.Dial("tcp", d.API)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// Once the held connection is accepted, a second API request waits.
	served := make(chan int, 1)
	go func() {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		req, _ := http.NewRequest("GET", d.BaseURL()+"/models", nil)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := c.Do(req)
		if err != nil {
			served <- 0
			return
		}
		resp.Body.Close()
		served <- resp.StatusCode
	}()
	select {
	case st := <-served:
		t.Fatalf("a second API connection was served (%d) at max_connections 1", st)
	case <-time.After(500 * time.Millisecond):
	}
	for _, p := range []string{"/readyz", "/healthz", "/admin/reviews"} {
		if st, _ := adminGet(t, d, p); st != 200 {
			t.Errorf("admin %s: %d with the API at max_connections, want 200", p, st)
		}
	}
	held.Close()
	select {
	case st := <-served:
		if st != 200 {
			t.Errorf("the waiting API request got %d, want 200", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting API connection was not served after the held one closed")
	}
}

// startOneConnection starts contractd with an admin listener and
// server.max_connections 1 on listen, the upstream answering byModel.
func startOneConnection(t *testing.T) *daemon {
	t.Helper()
	up := newUpstream(t, byModel)
	text := renderConfig(cfgOpts{upstream: up.URL(), server: "  max_connections: 1\n"})
	return startDaemon(t, writeConfig(t, t.TempDir(), text), baseEnv())
}
