package faults

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/sse"
	"github.com/contractd/contractd/internal/testkit"
)

// TestReloadUnderLoad swaps configs (compiled afresh each time, as a
// reload does) while clients hammer contract, streaming and passthrough
// routes: every request must succeed on whichever config it started with,
// and every one is audited.
func TestReloadUnderLoad(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, okHandler)
	// Upstream timeouts are generous: this test is about reloads, and the
	// harness's 300 ms default timed out once on a machine at load 25.
	e := newEnv(t, up.URL(), opts{Keys: true, UpTimeout: "10s", RequestTimeout: "20s"}, nil)
	variants := []opts{
		{Keys: true, UpTimeout: "10s", RequestTimeout: "20s"},
		{Keys: true, UpTimeout: "5s", RequestTimeout: "20s", MaxRetries: -1, MaxConcurrency: 3},
		{Keys: true, UpTimeout: "10s", RequestTimeout: "20s", RateLimit: "{requests_per_second: 1000000, burst: 1000000}", MaxConcurrency: 8},
	}
	var swaps atomic.Int64
	stop := testkit.Repeat(1, func(_, i int) bool {
		e.reload(variants[i%len(variants)])
		swaps.Add(1)
		time.Sleep(2 * time.Millisecond)
		return true
	})

	bodies := []string{askC, askP,
		`{"model":"c","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`}
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	// At least 1.5 s, and on until 50 reloads and 50 requests have happened
	// (a loaded machine needs longer), but never past 20 s.
	deadline, hardStop := time.Now().Add(1500*time.Millisecond), time.Now().Add(20*time.Second)
	more := func() bool {
		now := time.Now()
		return now.Before(deadline) || (now.Before(hardStop) && (swaps.Load() < 50 || sent.Load() < 50))
	}
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for i := w; more(); i++ {
				body := bodies[i%len(bodies)]
				r := e.post(context.Background(), body)
				sent.Add(1)
				if r.Err != nil || r.Status != 200 {
					if failed.Add(1) < 5 {
						t.Errorf("status %d err %v body %s", r.Status, r.Err, r.Body)
					}
					continue
				}
				if strings.Contains(body, `"stream":true`) {
					rd := sse.NewReader(strings.NewReader(string(r.Body)))
					done := false
					for {
						ev, err := rd.Next()
						if err != nil {
							break
						}
						done = ev.IsDone()
					}
					if !done {
						t.Errorf("stream did not end with [DONE]: %s", r.Body)
					}
				}
			}
		})
	}
	wg.Wait()
	stop()
	if swaps.Load() < 50 {
		t.Errorf("only %d reloads happened", swaps.Load())
	}
	n := int(sent.Load())
	if n < 50 {
		t.Errorf("only %d requests went through", n)
	}
	if evs := e.audit.waitEvents(t, n); len(evs) != n {
		t.Errorf("%d audit events for %d requests", len(evs), n)
	}
	t.Logf("%d requests across %d reloads", n, swaps.Load())
	wantNoSecrets(t, e)
}

// A request keeps the config it started with: removing a route while a
// request on it is in flight lets that request finish; the next one is 404.
func TestReloadRemovesRouteInFlight(t *testing.T) {
	noLeaks(t)
	gate := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			<-gate
		}
		okHandler(w, r, n)
	})
	e := newEnv(t, up.URL(), opts{}, nil)
	res := make(chan *result, 1)
	go func() { res <- e.post(context.Background(), askP) }()
	for up.Hits() == 0 {
		time.Sleep(time.Millisecond)
	}
	e.reload(opts{NoPassthrough: true})
	close(gate)
	wantOK(t, <-res)
	wantError(t, e.post(context.Background(), askP), 404, "invalid_request_error", "model_not_found")
	wantOK(t, e.post(context.Background(), askC))
}
