package proxy

// No goroutine outlives its request: after a mix of successes, rejections,
// upstream failures, timeouts, streams and client disconnects, and once
// servers and idle connections are closed, the goroutine count settles
// back (goleak is not a dependency; runtime.NumGoroutine with a settle loop).

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestNoGoroutineLeaks(t *testing.T) {
	check := noLeaks(t)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		switch c.JSON["model"] {
		case "raw-upstream-model":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		switch msgs := c.Messages(); msgs[len(msgs)-1]["content"] {
		case "reset":
			hijack(w).Close()
		case "hang":
			h0hang(r)
		case "503":
			reply(w, 503, nil)
		default:
			byTemperature(invalidAnswer, validAnswer)(w, r, c)
		}
	}, cfg{})
	msg := func(s string) string { return `{"model":"free","messages":[{"role":"user","content":"` + s + `"}]}` }
	for i := 0; i < 2; i++ {
		for _, tc := range []struct {
			body   string
			status int
		}{
			{msg("hi"), 200},
			{`{"model":"free","stream":true,"messages":[` + userHi + `]}`, 200},
			{`{"model":"free","tools":[]}`, 400},
			{msg("reset"), 502},
			{msg("503"), 502},
			{msg("hang"), 504},
			{`{"model":"raw","stream":true}`, 200},
			{`{"model":"raw-fast"}`, 200},
		} {
			if r := h.post("", tc.body); r.Status != tc.status {
				t.Errorf("%s: status %d, want %d: %s", tc.body, r.Status, tc.status, r.Body)
			}
		}
		// A client that hangs up mid-request.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		errc := startHung(t, h, ctx, `{"model":"slow","messages":[{"role":"user","content":"hang"}]}`)
		<-errc
		cancel()
	}
	h.Close()
	check()
}
