package replay

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
)

func liveOptions(t *testing.T, rt *config.Runtime) Options {
	t.Helper()
	srv, err := LiveServer(rt, func(string) (string, bool) { return "sk-fake", true })
	if err != nil {
		t.Fatal(err)
	}
	return Options{Runtime: rt, Live: true, Server: srv, Progress: -1}
}

func runLive(t *testing.T, ctx context.Context, o Options, files ...string) (*Summary, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	o.Out, o.Err = &out, &errb
	s, err := Audit(ctx, o, files)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errb.String())
	}
	return s, out.String(), errb.String()
}

// TestLiveAudit: --live sends each stored request through the current
// attempt plan against the upstream; a request that was valid and now
// ends in needs_review is a regression, named with its violations.
func TestLiveAudit(t *testing.T) {
	checkNoLeak(t)
	up, _, _, a := servedAudit(t, "SHORT", "LONG", "BADWORD", "FLAKY")
	served := up.Hits()
	_, tight := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL(), schema: tightSchema})
	s, out, _ := runLive(t, context.Background(), liveOptions(t, tight), a)
	// SHORT: valid again (1 call). LONG: now invalid twice (2 calls).
	// BADWORD: still invalid (2). FLAKY: invalid, then valid at 0 (2).
	if s.Mode != "live" || s.Total.Items != 4 || s.Total.StillValid != 2 || s.Total.NewlyInvalid != 1 || s.Total.StillInvalid != 1 || s.ExitCode() != ExitRegressed {
		t.Fatalf("summary %+v\n%s", s, out)
	}
	if got := up.Hits() - served; got != 7 {
		t.Errorf("%d upstream calls, want 7", got)
	}
	if !strings.Contains(out, "classify valid -> invalid: maxLength at /summary") || !strings.Contains(out, "[2 attempts]") ||
		!strings.Contains(out, "live replay: REGRESSION: 1 previously valid request(s) now end in needs_review") {
		t.Fatalf("output:\n%s", out)
	}
	// The request sent is the stored input, as the prompt renders it.
	found := false
	for _, c := range up.Calls() {
		msgs := c.Messages()
		if c.Temperature() == 0.5 && len(msgs) == 2 && msgs[1]["content"] == "Subject: Claim D\nmarker FLAKY: Hello, my window broke in the storm. I was charged twice too.\n" {
			found = true
		}
	}
	if !found {
		t.Error("no upstream call carried the stored input as the prompt renders it")
	}
}

// TestLiveConcurrencyAndBudget: at most --concurrency requests are in
// flight, and at most --max-requests stored requests are sent; the rest
// are counted as not sent.
func TestLiveConcurrencyAndBudget(t *testing.T) {
	checkNoLeak(t)
	var slow atomic.Bool
	up := testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
		if slow.Load() {
			time.Sleep(40 * time.Millisecond)
		}
		testkit.Reply(w, 200, testkit.Completion{ID: "c", Model: "m", Content: outputs["SHORT"]}.JSON())
	})
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	markers := make([]string, 12)
	for i := range markers {
		markers[i] = "SHORT"
	}
	a := writeFile(t, dir, "audit.jsonl", serveAudit(t, rt, markers...))
	slow.Store(true)
	before := up.Hits()
	o := liveOptions(t, rt)
	o.Concurrency, o.MaxRequests, o.Progress = 3, 7, 30*time.Millisecond
	s, _, errb := runLive(t, context.Background(), o, a)
	if s.Total.Items != 7 || s.NotRun != 5 || s.Total.StillValid != 7 {
		t.Fatalf("summary %+v", s)
	}
	if got := up.Hits() - before; got != 7 {
		t.Errorf("%d requests sent, want 7", got)
	}
	if p := up.Peak(); p > 3 || p < 2 {
		t.Errorf("peak concurrency %d, want at most 3 (and more than 1)", p)
	}
	if !strings.Contains(errb, "--max-requests 7 reached; 5 stored request(s) not sent") ||
		!strings.Contains(errb, "requests sent,") || !strings.Contains(errb, "/7 requests sent") {
		t.Errorf("stderr:\n%s", errb)
	}
}

// TestLiveInterrupt: Ctrl-C (the context ending) stops a live replay
// cleanly: nothing more is sent, requests in flight are cancelled, and the
// summary covers what ran.
func TestLiveInterrupt(t *testing.T) {
	checkNoLeak(t)
	var hang atomic.Bool
	var hanging, answered atomic.Int64
	var up *testkit.Upstream
	up = testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
		if hang.Load() && strings.Contains(string(c.Body), "marker LONG") {
			hanging.Add(1)
			up.Hang(r)
			return
		}
		answered.Add(1)
		testkit.Reply(w, 200, testkit.Completion{ID: "c", Model: "m", Content: outputs["SHORT"]}.JSON())
	})
	dir := t.TempDir()
	_, rt := writeConfig(t, dir, cfgOpts{upstream: up.URL()})
	markers := []string{"SHORT", "SHORT", "LONG", "LONG"}
	for range 40 {
		markers = append(markers, "SHORT")
	}
	a := writeFile(t, dir, "audit.jsonl", serveAudit(t, rt, markers...))
	answered.Store(0) // serveAudit's own calls are not the replay's
	hang.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Interrupt once both LONG requests hang in flight.
		for hanging.Load() < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	o := liveOptions(t, rt)
	o.Concurrency, o.MaxRequests = 2, 0
	start := time.Now()
	s, out, errb := runLive(t, ctx, o, a)
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v to stop", time.Since(start))
	}
	// Workers take lines in parallel, so a LONG can take a slot before the
	// second SHORT is sent; that SHORT is then never sent. Whatever the
	// order, the summary counts exactly the requests that were answered.
	n := int(answered.Load())
	if !s.Stopped || s.Interrupted != 2 || n < 1 || n > 2 || s.Total.Items != n || s.Total.StillValid != n {
		t.Fatalf("summary %+v\n%s%s", s, out, errb)
	}
	if !strings.Contains(out, "live replay: no regression") || !strings.Contains(errb, "interrupted; the summary covers what ran (2 request(s) stopped in flight)") {
		t.Fatalf("output:\n%s\nstderr:\n%s", out, errb)
	}
	up.WaitCanceled(t, 2, 3*time.Second)
}

// TestLiveReviews: from the review store, the stored client request is
// sent as it was received.
func TestLiveReviews(t *testing.T) {
	up := upstreamByMarker(t)
	_, rt := writeConfig(t, t.TempDir(), cfgOpts{upstream: up.URL()})
	for name, st := range openStores(t) {
		t.Run(name, func(t *testing.T) {
			fillStore(t, st, rt)
			before := up.Hits()
			var out, errb bytes.Buffer
			o := liveOptions(t, rt)
			o.Out, o.Err = &out, &errb
			s, err := Reviews(context.Background(), o, st)
			if err != nil {
				t.Fatal(err)
			}
			// BADWORD items stay invalid (2 calls each); EXTRA items too.
			if s.Total.Items != 4 || s.Total.StillInvalid != 4 || up.Hits()-before != 8 {
				t.Fatalf("summary %+v, %d calls\n%s", s, up.Hits()-before, out.String())
			}
			for _, c := range up.Calls()[before:] {
				if msgs := c.Messages(); c.Temperature() == 0.5 && (len(msgs) != 2 || !strings.HasPrefix(msgs[1]["content"].(string), "Subject: Claim A\nmarker ")) {
					t.Errorf("upstream body %s", c.Body)
				}
			}
		})
	}
}
