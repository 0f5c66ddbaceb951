package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"
)

// serve's stdout (the audit with sink: stdout) piped into a collector that
// dies (a `contractd serve | shipper` pipeline, a log agent that crashed):
// the next audit line is a write to a broken pipe. Before, Go's default
// for fd 1 killed serve with SIGPIPE at that write (exit 141 in a shell):
// the requests in flight cut off, no drain, no last spool move, and no line
// saying why. Now the write fails like any other audit write (counted in
// contractd_audit_write_errors_total, `audit write failed` logged at most
// once a minute): the request is answered and serve keeps serving, then
// drains on SIGTERM and exits 0.
func TestServeSurvivesBrokenStdout(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL()}))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, stderr: &lineLog{}, stdout: &lineLog{}, done: make(chan struct{})}
	d.cmd = exec.Command(binPath, "serve", "-c", cfg)
	d.cmd.Env = envList(baseEnv())
	d.cmd.Stdout = w // the child writes to the pipe itself: no copying goroutine to notice
	d.cmd.Stderr = d.stderr
	d.cmd.Dir = t.TempDir()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		if !d.exited() {
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("contractd stderr:\n%s", d.stderr)
		}
	})
	d.awaitListening(cfg)

	// One request's audit line read, then the collector dies.
	if resp, b := post(t, d, reviewBody("review-always-bad", "first, read")); resp.StatusCode != 422 {
		t.Fatalf("first request: %d %s", resp.StatusCode, b)
	}
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("the first audit line: %v", err)
	}
	r.Close()

	for i, text := range []string{"second, into the broken pipe", "third"} {
		resp, b := post(t, d, reviewBody("review-always-bad", text))
		if resp.StatusCode != 422 {
			t.Fatalf("request %d after the reader closed: %d %s", i+2, resp.StatusCode, b)
		}
	}
	if d.exited() {
		t.Fatalf("serve exited: %v", d.err)
	}
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 2 {
		t.Errorf("contractd_audit_write_errors_total: %d, want 2", n)
	}
	// The second failure within a minute of the first is not logged on its
	// own (audit write failures are logged at most once a minute); each
	// request's "request" line says audit_failed.
	if !waitFor(5*time.Second, func() bool { return d.countLog(msgIs("audit write failed")) == 1 }) {
		t.Errorf("%d 'audit write failed' lines, want 1", d.countLog(msgIs("audit write failed")))
	}
	if n := d.countLog(func(m map[string]any) bool { return m["msg"] == "request" && m["audit_failed"] == true }); n != 2 {
		t.Errorf("%d request lines with audit_failed, want 2", n)
	}
	d.signal(15)
	if code := d.wait(30 * time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
}
