package proxy

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLargeBodyTurns: requests with a large body take turns for their
// CPU-heavy stages, small ones never wait for a turn, and no turn is held
// while waiting for the upstream.
func TestLargeBodyTurns(t *testing.T) {
	large := string(largeChatBody("free", 2*largeBody))
	for _, tc := range []struct {
		name    string
		held    int // turns taken by the test before the request
		body    string
		status  int
		code    ErrorCode
		message string
	}{
		{name: "small request while every turn is held", held: -1, body: freeReq, status: http.StatusOK},
		{name: "large request with a free turn", held: 0, body: large, status: http.StatusOK},
		{name: "large request while every turn is held: request_timeout", held: -1, body: large,
			status: http.StatusGatewayTimeout, code: CodeRequestTimeout, message: "request_timeout passed waiting for a turn to process a large body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, always(validAnswer), cfg{MaxBody: 1 << 20, RequestTimeout: "300ms"})
			held := tc.held
			if held < 0 {
				held = cap(h.srv.turns)
			}
			for range held {
				h.srv.turns <- struct{}{}
			}
			r := h.post("", tc.body)
			for range held {
				<-h.srv.turns
			}
			if tc.status == http.StatusOK {
				wantSuccess(t, r, "application/json", "free", 1)
			} else {
				wantError(t, r, tc.status, typeServer, tc.code, nil)
				if got := r.errorObj()["message"]; got != tc.message {
					t.Errorf("message %q", got)
				}
			}
			if n := len(h.srv.turns); n != 0 {
				t.Errorf("%d turns still held after the request", n)
			}
		})
	}
}

// TestLargeBodyTurnFreeDuringUpstreamCall: with one turn, two large
// requests reach the upstream together: the turn is given back before
// the call.
func TestLargeBodyTurnFreeDuringUpstreamCall(t *testing.T) {
	var inCall, most atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		n := inCall.Add(1)
		defer inCall.Add(-1)
		if n >= 2 {
			once.Do(func() { close(both) })
		}
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-both:
		case <-time.After(time.Second):
		}
		reply(w, 200, completion(validAnswer, "stop", 10, 5))
	}, cfg{MaxBody: 1 << 20, RequestTimeout: "3s"})
	h.srv.turns = make(largeTurns, 1)
	body := string(largeChatBody("free", 2*largeBody))
	var wg sync.WaitGroup
	results := make([]*result, 2)
	for i := range results {
		wg.Go(func() {
			// Distinct bodies: identical ones would wait for each other's verdict.
			b := []byte(body)
			b[len(b)-len(`"}]}`)-1] = byte('0' + i)
			results[i] = h.post("", string(b))
		})
	}
	wg.Wait()
	for _, r := range results {
		wantSuccess(t, r, "application/json", "free", 1)
	}
	if most.Load() != 2 {
		t.Errorf("at most %d upstream calls at once, want 2: a turn was held through the call", most.Load())
	}
	if n := len(h.srv.turns); n != 0 {
		t.Errorf("%d turns still held", n)
	}
}
