package faults

// The upstream misbehaves. An upstream failure is never reported as a
// contract violation (the client must be able to tell "try again later"
// from "your output was rejected"): connect errors, per-call timeouts, 429
// and 5xx are retried up to max_retries (Retry-After honoured) and then answered at once with 502 upstream_error (the status
// in the message) or 504 upstream_timeout; any other 4xx, or a 200 whose
// body is not a chat completion, is 502 at once without a retry.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/sse"
)

func TestUpstream5xx(t *testing.T) {
	for _, status := range []int{500, 502, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			noLeaks(t)
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
				reply(w, status, []byte(`{"error":{"message":"upstream is sad"}}`))
			})
			e := newEnv(t, up.URL(), opts{}, nil)
			r := e.post(context.Background(), askC)
			want502(t, r, fmt.Sprint(status), up, 3, "1 + max_retries 2")
			if got := r.Header.Get("X-Contract-Attempts"); got != "1" {
				t.Errorf("X-Contract-Attempts %q, want 1 (transport retries are not attempts)", got)
			}
			evs := e.audit.waitEvents(t, 1)
			if evs[0].Outcome != "upstream_error" || evs[0].Status != 502 {
				t.Errorf("audit outcome %s status %d", evs[0].Outcome, evs[0].Status)
			}
			// Passthrough relays the upstream's answer as it is.
			r = e.post(context.Background(), askP)
			if r.Err != nil || r.Status != status {
				t.Errorf("passthrough: status %d err %v, want the upstream's %d", r.Status, r.Err, status)
			}
		})
	}
	t.Run("transient", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				reply(w, 503, []byte(`overloaded`))
				return
			}
			okHandler(w, r, n)
		})
		wantOKAfter(t, up, 2)
	})
}

func TestUpstream429RetryAfter(t *testing.T) {
	t.Run("honoured", func(t *testing.T) {
		noLeaks(t)
		var first time.Time
		var gap time.Duration
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				first = time.Now()
				w.Header().Set("Retry-After", "1")
				reply(w, 429, []byte(`{"error":{"message":"rate limited"}}`))
				return
			}
			gap = time.Since(first)
			okHandler(w, r, n)
		})
		wantOKAfter(t, up, 2)
		if gap < 950*time.Millisecond {
			t.Errorf("retried after %v, want >= Retry-After 1s", gap)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("Retry-After", "0")
			reply(w, 429, []byte(`{"error":{"message":"rate limited"}}`))
		})
		e := newEnv(t, up.URL(), opts{}, nil)
		want502(t, e.post(context.Background(), askC), "429", up, 3, "1 + max_retries 2")
	})
	t.Run("longer than the request deadline", func(t *testing.T) {
		// Waiting would outlive request_timeout: answer at once rather
		// than sleep into a 504.
		noLeaks(t)
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("Retry-After", "30")
			reply(w, 429, []byte(`{"error":{"message":"rate limited"}}`))
		})
		e := newEnv(t, up.URL(), opts{RequestTimeout: "2s"}, nil)
		r := e.post(context.Background(), askC)
		wantError(t, r, 502, "upstream_error", "upstream_error")
		if r.Elapsed > time.Second || up.Hits() != 1 {
			t.Errorf("took %v with %d hits; want an immediate answer after 1 hit", r.Elapsed, up.Hits())
		}
	})
}

func TestUpstreamReset(t *testing.T) {
	t.Run("before the response", func(t *testing.T) {
		noLeaks(t)
		up := newRawUpstream(t, func(c *net.TCPConn, n int) { reset(c) })
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askC)
		want502(t, r, "", up, 3, "a reset is a transport error, retried")
		r = e.post(context.Background(), askP)
		wantError(t, r, 502, "upstream_error", "upstream_error")
		e.audit.waitEvents(t, 2)
	})
	t.Run("mid-body", func(t *testing.T) {
		noLeaks(t)
		up := newRawUpstream(t, func(c *net.TCPConn, n int) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n" +
				`{"id":"chatcmpl-up","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"{\"ans`))
			time.Sleep(20 * time.Millisecond) // let the head reach the peer first
			reset(c)
		})
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askC)
		want502(t, r, "", up, 3, "a torn body is a transport error, retried")
		if strings.Contains(string(r.Body), "chatcmpl-up") {
			t.Errorf("partial upstream body leaked to the client: %s", r.Body)
		}
		e.audit.waitEvents(t, 1)
	})
	t.Run("mid-body passthrough", func(t *testing.T) {
		// The upstream's 200 head may already be on its way to the client:
		// the only honest outcome is a connection the client sees fail
		// (never a body it could take for complete), and the request is
		// still audited (one line per chat-completions request).
		noLeaks(t)
		up := newRawUpstream(t, func(c *net.TCPConn, n int) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"id\":\"chatcmpl-up\""))
			time.Sleep(20 * time.Millisecond)
			reset(c)
		})
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askP)
		switch {
		case r.Err != nil: // truncated: the client knows
		case r.Status == 502 && r.errField("code") == "upstream_error":
		default:
			t.Fatalf("status %d err %v body %q: a torn upstream body must not look complete", r.Status, r.Err, r.Body)
		}
		evs := e.audit.waitEvents(t, 1)
		if evs[0].Outcome != "upstream_error" {
			// Status is what went out on the wire (the upstream's 200 head
			// may already have been sent); the outcome says it broke.
			t.Errorf("audit outcome %s status %d, want upstream_error", evs[0].Outcome, evs[0].Status)
		}
	})
}

func TestUpstreamInvalidEnvelope(t *testing.T) {
	bodies := map[string]string{
		"not json":             `<html>502 Bad Gateway</html>`,
		"truncated json":       `{"id":"chatcmpl-up","object":"chat.completion","choices":[{"index":0`,
		"json, no choices":     `{"id":"chatcmpl-up","object":"chat.completion","choices":[]}`,
		"json, wrong shape":    `{"choices":"nope"}`,
		"json array":           `[{"choices":[]}]`,
		"empty body":           ``,
		"content not string":   `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":{"answer":"x"}}}]}`,
		"chunk not completion": `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"{}"}}]}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			noLeaks(t)
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) { reply(w, 200, []byte(body)) })
			e := newEnv(t, up.URL(), opts{}, nil)
			want502(t, e.post(context.Background(), askC), "200", up, 1, "a 200 that is not a completion is not retried")
		})
	}
}

// sseBody is what a streaming upstream sends.
func sseBody() string {
	return `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n" +
		`data: {"id":"chatcmpl-up","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"{\"answer\":\"x\"}"}}]}` + "\n\n" +
		`data: {"id":"chatcmpl-up","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
}

func TestUpstreamUnaskedSSE(t *testing.T) {
	noLeaks(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(sseBody()))
	})
	e := newEnv(t, up.URL(), opts{}, nil)
	// Contract route: contractd asked for stream:false; an event stream is
	// not a chat completion: 502 at once.
	r := e.post(context.Background(), askC)
	want502(t, r, "", up, 1, "not retried")
	// Passthrough relays what the upstream sent, as it is.
	r = e.post(context.Background(), askP)
	wantOK(t, r)
	rd := sse.NewReader(strings.NewReader(string(r.Body)))
	n, done := 0, false
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		n++
		done = ev.IsDone()
	}
	if n != 4 || !done {
		t.Errorf("passthrough relayed %d events (done %v), want 4 ending in [DONE]", n, done)
	}
}

func TestUpstreamHang(t *testing.T) {
	t.Run("per-call timeout", func(t *testing.T) {
		noLeaks(t)
		up := newHangingUpstream(t)
		e := newEnv(t, up.URL(), opts{UpTimeout: "200ms", MaxRetries: 1}, nil)
		r := e.post(context.Background(), askC)
		wantError(t, r, 504, "upstream_error", "upstream_timeout")
		if up.Hits() != 2 {
			t.Errorf("upstream hits %d, want 2 (timeouts are retried)", up.Hits())
		}
		if r.Elapsed > 2*time.Second {
			t.Errorf("took %v", r.Elapsed)
		}
		up.waitCanceled(t, 2, time.Second)
	})
	t.Run("request timeout", func(t *testing.T) {
		noLeaks(t)
		up := newHangingUpstream(t)
		e := newEnv(t, up.URL(), opts{UpTimeout: "10s", RequestTimeout: "400ms"}, nil)
		r := e.post(context.Background(), askC)
		wantError(t, r, 504, "upstream_error", "upstream_timeout")
		if r.Elapsed < 350*time.Millisecond || r.Elapsed > 2*time.Second {
			t.Errorf("answered after %v, want about request_timeout 400ms", r.Elapsed)
		}
		up.waitCanceled(t, 1, time.Second)
	})
	t.Run("body stalls", func(t *testing.T) {
		noLeaks(t)
		var up *upstream
		up = newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`{"id":"chatcmpl-up",`))
			w.(http.Flusher).Flush()
			up.hang(r)
		})
		e := newEnv(t, up.URL(), opts{UpTimeout: "200ms", MaxRetries: -1}, nil)
		r := e.post(context.Background(), askC)
		wantError(t, r, 504, "upstream_error", "upstream_timeout")
	})
	t.Run("passthrough", func(t *testing.T) {
		noLeaks(t)
		up := newHangingUpstream(t)
		e := newEnv(t, up.URL(), opts{UpTimeout: "200ms"}, nil)
		r := e.post(context.Background(), askP)
		wantError(t, r, 504, "upstream_error", "upstream_timeout")
		up.waitCanceled(t, 1, time.Second)
		evs := e.audit.waitEvents(t, 1)
		if evs[0].Status != 504 || evs[0].Outcome != "upstream_error" {
			t.Errorf("audit %d %s", evs[0].Status, evs[0].Outcome)
		}
	})
}

func TestUpstreamHugeBody(t *testing.T) {
	const size = 10 << 20
	// postHuge sends ask through a proxy whose upstream answers body, a
	// well-formed chat completion whose content is 10 MB.
	postHuge := func(t *testing.T, ask string) (up *upstream, r *result, body []byte) {
		noLeaks(t)
		body = completion(`{"answer":"` + strings.Repeat("x", size) + `"}`)
		up = newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) { reply(w, 200, body) })
		e := newEnv(t, up.URL(), opts{UpTimeout: "5s"}, nil)
		return up, e.post(context.Background(), ask), body
	}
	t.Run("contract", func(t *testing.T) {
		up, r, _ := postHuge(t, askC)
		wantError(t, r, 502, "upstream_error", "upstream_error")
		if up.Hits() != 1 {
			t.Errorf("upstream hits %d, want 1", up.Hits())
		}
		if len(r.Body) > 4096 {
			t.Errorf("error body is %d bytes", len(r.Body))
		}
	})
	t.Run("contract, chunked garbage", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.WriteHeader(200)
			chunk := []byte(strings.Repeat("z", 64<<10))
			for i := 0; i < size/len(chunk); i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		e := newEnv(t, up.URL(), opts{UpTimeout: "5s"}, nil)
		r := e.post(context.Background(), askC)
		wantError(t, r, 502, "upstream_error", "upstream_error")
	})
	t.Run("passthrough relays it", func(t *testing.T) {
		_, r, body := postHuge(t, askP)
		wantOK(t, r)
		if len(r.Body) != len(body) {
			t.Errorf("relayed %d bytes, want %d", len(r.Body), len(body))
		}
	})
}

// ------------------------------------------------------------- the client

func TestClientDisconnect(t *testing.T) {
	for _, route := range []string{"c", "p"} {
		t.Run("waiting for upstream "+route, func(t *testing.T) {
			noLeaks(t)
			up := newHangingUpstream(t)
			e := newEnv(t, up.URL(), opts{UpTimeout: "10s"}, nil)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				for up.Hits() == 0 {
					time.Sleep(2 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
				cancel()
			}()
			body := askC
			if route == "p" {
				body = askP
			}
			r := e.post(ctx, body)
			if r.Err == nil {
				t.Fatalf("request finished with %d; want the client's cancel", r.Status)
			}
			// The upstream call is abandoned at once, not left to time out.
			up.waitCanceled(t, 1, time.Second)
			if up.Hits() != 1 {
				t.Errorf("upstream hits %d, want 1 (a client disconnect is not retried)", up.Hits())
			}
			evs := e.audit.waitEvents(t, 1)
			if evs[0].Status != 499 {
				t.Errorf("audit status %d, want 499", evs[0].Status)
			}
		})
	}
	t.Run("mid-upload", func(t *testing.T) {
		noLeaks(t)
		up := newUpstream(t, okHandler)
		e := newEnv(t, up.URL(), opts{}, &testTimeouts)
		c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 3000\r\n\r\n{\"model\":\"c\",\"mess", keyAlpha)
		time.Sleep(50 * time.Millisecond)
		reset(c.(*net.TCPConn))
		time.Sleep(100 * time.Millisecond)
		if up.Hits() != 0 {
			t.Errorf("a half-sent request reached the upstream")
		}
		// The server keeps serving.
		wantOK(t, e.post(context.Background(), askC))
	})
	t.Run("mid-stream passthrough", func(t *testing.T) {
		noLeaks(t)
		var up *upstream
		up = sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) {
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: {\"i\":%d}\n\n", i); err != nil {
					return
				}
				flush()
				select {
				case <-r.Context().Done():
					up.NoteCanceled()
					return
				case <-up.Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
		e := newEnv(t, up.URL(), opts{UpTimeout: "10s"}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(askP))
		req.Header.Set("Authorization", "Bearer "+keyAlpha)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rd := sse.NewReader(bufio.NewReader(resp.Body))
		for i := 0; i < 3; i++ {
			if _, err := rd.Next(); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
		}
		cancel()
		resp.Body.Close()
		up.waitCanceled(t, 1, 2*time.Second)
		evs := e.audit.waitEvents(t, 1)
		if evs[0].Status != 499 || evs[0].Outcome != "rejected" {
			t.Errorf("audit status %d outcome %s, want 499 rejected", evs[0].Status, evs[0].Outcome)
		}
	})
}

// want502 checks a 502 upstream_error after hits upstream calls (why says
// why that many); status, when set, is the upstream's, which the message
// must name.
func want502(t *testing.T, r *result, status string, up interface{ Hits() int }, hits int, why string) {
	t.Helper()
	wantError(t, r, 502, "upstream_error", "upstream_error")
	if msg := r.errField("message"); status != "" && !strings.Contains(msg, status) {
		t.Errorf("message %q does not name the upstream status %s", msg, status)
	}
	if up.Hits() != hits {
		t.Errorf("upstream hits %d, want %d (%s)", up.Hits(), hits, why)
	}
}

// wantOKAfter serves the default config over up, posts askC and wants a
// 200 after hits upstream calls.
func wantOKAfter(t *testing.T, up *upstream, hits int) {
	t.Helper()
	e := newEnv(t, up.URL(), opts{}, nil)
	wantOK(t, e.post(context.Background(), askC))
	if up.Hits() != hits {
		t.Fatalf("upstream hits %d, want %d", up.Hits(), hits)
	}
}
