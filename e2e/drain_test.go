package e2e

import (
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
