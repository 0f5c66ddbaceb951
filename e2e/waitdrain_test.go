package e2e

import (
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// A client long-polling a review (?wait=) when the server is told to stop
// gets its answer (the item as it is) at once, and the drain stays clean:
// exit 0 well within shutdown_timeout.
func TestReviewWaitEndsOnDrain(t *testing.T) {
	t.Parallel()
	_, d := serveBase(t, t.TempDir())
	id := needsReview(t, d, "Cold soup.")
	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	// The poll gets a connection of its own, as a long-polling client's
	// is: on a pooled idle one (the POST's) it could race shutdown
	// closing idle connections.
	pollClient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	// Count from no connection at all: the POST's idle one could close
	// at any moment (any parallel test may close the shared client's
	// idle connections), and its close would cancel the poll's accept in
	// a count taken with it open.
	httpClient.CloseIdleConnections()
	if !waitFor(10*time.Second, func() bool { return apiConnections(t, d) == 0 }) {
		t.Fatalf("%d API connections open with no client", apiConnections(t, d))
	}
	go func() {
		req, _ := http.NewRequest("GET", d.BaseURL()+"/reviews/"+id+"?wait=60s", nil)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := pollClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{status: resp.StatusCode, body: string(b)}
	}()
	// SIGTERM closes the API listener: a poll still in the kernel's
	// backlog would be refused, not answered. Wait until contractd has
	// accepted its connection (shutdown then lets it finish), then give
	// the handler a moment to park on the wait.
	if !waitFor(10*time.Second, func() bool { return apiConnections(t, d) > 0 }) {
		t.Fatal("contractd never accepted the poll's connection")
	}
	time.Sleep(300 * time.Millisecond) // the poll is waiting
	start := time.Now()
	d.signal(syscall.SIGTERM)
	select {
	case a := <-got:
		if a.err != nil || a.status != 200 {
			t.Errorf("poll: %d %v %s", a.status, a.err, a.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the poll did not end on SIGTERM")
	}
	if code := d.wait(20 * time.Second); code != 0 {
		t.Errorf("exit %d after %v, want a clean drain", code, time.Since(start))
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("exited %v after SIGTERM", el)
	}
}

// apiConnections is contractd_connections_open: the connections contractd
// has accepted on listen and not yet closed.
func apiConnections(t *testing.T, d *daemon) int64 {
	t.Helper()
	n := d.metricValue(t, "contractd_connections_open")
	if n < 0 {
		t.Fatalf("no contractd_connections_open on /metrics")
	}
	return n
}
