package proxy

// Upstream failures answer 502/504 upstream_error, never a contract
// violation (the client retries later instead of treating its output as
// rejected), and transport retries do not count as contract attempts.

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
)

const freeReq = `{"model":"free","messages":[` + userHi + `]}`

func hijack(w http.ResponseWriter) net.Conn {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	return conn
}

func TestUpstreamErrors(t *testing.T) {
	tests := []struct {
		name    string
		handle  upHandler
		cfg     cfg
		route   string
		status  int
		code    ErrorCode
		hits    int    // upstream hits: 1 + transport retries
		message string // in error.message
		maxTime time.Duration
	}{
		{name: "upstream 400", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 400, []byte(`{"error":{"message":"Invalid parameter: messages","type":"invalid_request_error"}}`))
		}, status: 502, code: "upstream_error", hits: 1, message: "400"},
		{name: "upstream 401", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 401, []byte(`{"error":{"message":"Incorrect API key"}}`))
		}, status: 502, code: "upstream_error", hits: 1, message: "401"},
		{name: "garbage 200", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 200, []byte(`<html>oops</html>`))
		}, status: 502, code: "upstream_error", hits: 1, message: "200"},
		{name: "200 without choices", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 200, []byte(`{"id":"x","object":"chat.completion","choices":[]}`))
		}, status: 502, code: "upstream_error", hits: 1, message: "200"},
		{name: "200 chunk", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 200, []byte(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"{}"}}]}`))
		}, status: 502, code: "upstream_error", hits: 1, message: "200"},
		{name: "500 after max_retries", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 500, []byte(`{"error":{"message":"boom"}}`))
		}, status: 502, code: "upstream_error", hits: 3, message: "500"},
		{name: "503 after max_retries", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 503, []byte(`overloaded`))
		}, status: 502, code: "upstream_error", hits: 3, message: "503"},
		{name: "429 after max_retries", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			reply(w, 429, []byte(`{"error":{"message":"slow down"}}`))
		}, status: 502, code: "upstream_error", hits: 3, message: "429"},
		{name: "connection reset", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			conn := hijack(w)
			_ = conn.(*net.TCPConn).SetLinger(0) // RST
			conn.Close()
		}, status: 502, code: "upstream_error", hits: 3},
		{name: "connection closed early", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			conn := hijack(w)
			_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"id\":\"chatcmpl"))
			conn.Close()
		}, status: 502, code: "upstream_error", hits: 3},
		{name: "upstream hangs past timeout", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}, cfg: cfg{UpTimeout: "200ms"}, status: 504, code: "upstream_timeout", hits: 3, maxTime: 2 * time.Second},
		{name: "body stalls past timeout", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`{"id":`))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}, cfg: cfg{UpTimeout: "200ms"}, status: 504, code: "upstream_timeout", hits: 3, maxTime: 2 * time.Second},
		{name: "request_timeout", cfg: cfg{RequestTimeout: "300ms"}, route: "slow", handle: func(w http.ResponseWriter, r *http.Request, c *upCall) {
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		}, status: 504, code: "upstream_timeout", hits: 1, maxTime: time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.handle, tc.cfg)
			route := tc.route
			if route == "" {
				route = "free"
			}
			start := time.Now()
			r := h.post("", `{"model":"`+route+`","messages":[`+userHi+`]}`)
			elapsed := time.Since(start)
			wantError(t, r, tc.status, "upstream_error", tc.code, nil)
			if tc.maxTime > 0 && elapsed > tc.maxTime {
				t.Errorf("took %v", elapsed)
			}
			if msg := r.errorObj()["message"].(string); !strings.Contains(msg, tc.message) {
				t.Errorf("message %q lacks the upstream status %q", msg, tc.message)
			}
			if strings.Contains(string(r.Body), upstreamKey) || strings.Contains(string(r.Body), "Invalid parameter: messages") && tc.hits != 1 {
				t.Errorf("body: %s", r.Body)
			}
			// Transport retries only: no further contract attempt ran.
			calls := h.up.Calls()
			if len(calls) != tc.hits {
				t.Errorf("upstream hits %d, want %d", len(calls), tc.hits)
			}
			for _, c := range calls {
				if c.Temperature() != h.rt.Routes[route].Temperature {
					t.Errorf("hit %d at temperature %v: a contract attempt ran after an upstream failure", c.N, c.Temperature())
				}
			}
			wantContractHeaders(t, r, route, 1)
			ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
			if ev.Outcome != "upstream_error" || ev.Status != tc.status || ev.ErrorCode != string(tc.code) || len(ev.Attempts) != 1 {
				t.Errorf("audit %+v", ev)
			}
		})
	}
}

func TestTransportRetries(t *testing.T) {
	t.Run("429 Retry-After honoured", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			if c.N == 1 {
				w.Header().Set("Retry-After", "1")
				reply(w, 429, []byte(`{"error":{"message":"rate limited"}}`))
				return
			}
			reply(w, 200, completion(validAnswer, "stop", 3, 2))
		}, cfg{})
		start := time.Now()
		r := h.post("", freeReq)
		elapsed := time.Since(start)
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if elapsed < time.Second {
			t.Errorf("retried after %v, before Retry-After: 1", elapsed)
		}
		calls := h.up.Calls()
		if len(calls) != 2 {
			t.Errorf("upstream hits %d, want 2", len(calls))
		}
		if calls[0].Temperature() != calls[1].Temperature() || string(calls[0].Body) != string(calls[1].Body) {
			t.Error("the transport retry changed the request")
		}
		// A transport retry is not a contract attempt.
		wantContractHeaders(t, r, "free", 1)
		if !strings.Contains(string(r.Body), `"attempts":1`) {
			t.Errorf("contract.attempts: %s", r.Body)
		}
		if u := r.JSON["usage"].(map[string]any); u["total_tokens"] != float64(5) {
			t.Errorf("usage %v", u)
		}
	})
	t.Run("503 then success", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			if c.N <= 2 {
				reply(w, 503, nil)
				return
			}
			reply(w, 200, completion(validAnswer, "stop", 3, 2))
		}, cfg{})
		r := h.post("", freeReq)
		if r.Status != 200 || h.up.Hits() != 3 {
			t.Fatalf("status %d hits %d: %s", r.Status, h.up.Hits(), r.Body)
		}
		wantContractHeaders(t, r, "free", 1)
	})
	t.Run("connect error", func(t *testing.T) {
		t.Parallel()
		// A port nobody listens on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		c := NewCaller(testKeys)
		c.Backoff = time.Millisecond
		defer c.Client.CloseIdleConnections()
		u := &config.Upstream{Name: "dead", BaseURL: "http://" + addr + "/v1", Timeout: 200 * time.Millisecond, MaxRetries: 2}
		_, err = c.Call(context.Background(), u, []byte(`{}`), nil)
		ue, ok := err.(*UpstreamError)
		if !ok || ue.Timeout || ue.Status != 0 {
			t.Fatalf("err %#v", err)
		}
		if ae := ue.apiError("dead"); ae.Status != 502 || ae.Code != CodeUpstreamError {
			t.Errorf("api error %+v", ae)
		}
	})
}

func TestRetryAfterParsing(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {"2", 2 * time.Second, true}, {"0", 0, true}, {"-1", 0, false}, {"soon", 0, false},
		{time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, true},
	} {
		h := http.Header{}
		if tc.v != "" {
			h.Set("Retry-After", tc.v)
		}
		if got, ok := retryAfter(h); got != tc.want || ok != tc.ok {
			t.Errorf("Retry-After %q: %v %v, want %v %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
	h := http.Header{"Retry-After": {time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}}
	if got, _ := retryAfter(h); got < time.Second || got > 3*time.Second {
		t.Errorf("HTTP-date Retry-After: %v", got)
	}
	c := &Caller{Backoff: 100 * time.Millisecond}
	for try := 1; try <= 4; try++ {
		base := c.Backoff << (try - 1)
		if d := c.backoff(try, 0); d < base/2 || d > base {
			t.Errorf("backoff(%d) = %v, want in [%v, %v]", try, d, base/2, base)
		}
	}
	if d := c.backoff(1, time.Hour); d != 30*time.Second {
		t.Errorf("Retry-After is capped: %v", d)
	}
}
