package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/contractd/contractd/internal/testkit"
)

// An audit write that does not return (a hung disk or network mount, a
// pipe whose reader stopped: here a FIFO nobody reads) holds up its own
// request only. Every later request waits at most audit.BlockedAfter (5 s)
// for the sink, then is answered without its line, counted in
// contractd_audit_write_errors_total and logged; once the write returns,
// lines are written again. Before, the stuck write held the sink's lock:
// every chat request hung, past request_timeout, for as long as the write
// did (checked: a `cat` of the FIFO stopped with SIGSTOP; /healthz and
// /readyz kept answering 200 while no request was answered, nothing was
// logged or counted).
func TestAuditBlockedSinkHoldsUpOneRequest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "audit.fifo")
	// The reader is opened first (serve's open of a FIFO waits for one)
	// and reads nothing until the end: its pipe, made one page, fills.
	r := testkit.StuckFIFO(t, fifo)
	rfd := int(r.Fd())
	_, d := serveAudit(t, dir, "sink: file\n  path: audit.fifo")

	send := func(text string, timeout time.Duration) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, d.BaseURL()+"/chat/completions",
			strings.NewReader(reviewBody("review-sentiment", text)))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	// Fill the pipe until a request is not answered while the pipe holds
	// more than a page less a line: its write is stuck (a request merely
	// slow on a loaded machine finds room in the pipe).
	stuck := false
	for i := 0; i < 50 && !stuck; i++ {
		resp, err := send("Filling the pipe.", 2*time.Second)
		switch {
		case err != nil:
			n, ierr := unix.IoctlGetInt(rfd, unix.TIOCINQ) // FIONREAD
			if ierr != nil {
				t.Fatal(ierr)
			}
			stuck = n > 4096-1024
		case resp.StatusCode != 200:
			t.Fatalf("status %d while the pipe fills", resp.StatusCode)
		}
	}
	if !stuck {
		t.Fatal("50 requests answered: the pipe never filled")
	}
	start := time.Now()
	resp, err := send("The sink is blocked.", 20*time.Second)
	if err != nil {
		t.Fatalf("a request behind the stuck write was not answered in 20 s: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d behind the stuck write, want 200 (answered without its line)", resp.StatusCode)
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Errorf("answered after %v, want after about 5 s (audit.BlockedAfter)", took)
	}
	id := resp.Header.Get("X-Request-Id")
	l, ok := d.logLine(5*time.Second, func(m map[string]any) bool {
		return m["msg"] == "audit write failed" && m["request_id"] == id
	})
	if !ok || !strings.Contains(l["error"].(string), "blocked") {
		t.Errorf("audit write failed line for %s: %v (found %v), want an error saying the sink is blocked", id, l, ok)
	}
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 1 {
		t.Errorf("contractd_audit_write_errors_total: %d, want 1", n)
	}

	// The reader reads again: the stuck write returns, and the next line
	// is written whole.
	lines := testkit.Lines(r, 1000)
	resp, err = send("The reader is back.", 10*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the reader came back: %v %v", resp, err)
	}
	id = resp.Header.Get("X-Request-Id")
	deadline := time.After(10 * time.Second)
	for found := false; !found; {
		select {
		case l, open := <-lines:
			if !open {
				t.Fatalf("the pipe closed before the line of %s", id)
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("unreadable audit line %.200q: %v", l, err)
			}
			found = ev["request_id"] == id
		case <-deadline:
			t.Fatalf("no audit line for %s", id)
		}
	}
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 1 {
		t.Errorf("contractd_audit_write_errors_total after the reader came back: %d, want 1", n)
	}
}
