package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest writes req on a fresh connection to h's front server and
// returns what came back (the connection is closed by the server or after
// a second).
func rawRequest(t *testing.T, h *harness, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", h.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// route paths are matched exactly; "..", "//", "." or an encoded
// "/" never redirect and never reach another route.
func TestRoutePathsExact(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	body := `{"model":"free","messages":[` + userHi + `]}`
	for _, p := range []string{
		"/r/../v1/chat/completions",
		"/r//v1/chat/completions",
		"/r/free/../free/v1/chat/completions",
		"/r/./free/v1/chat/completions",
		"/r/free/v1//chat/completions",
		"/r/free/./v1/chat/completions",
		"/r/x/../../v1/chat/completions",
		"/r/%2e%2e/v1/chat/completions",
		"/r/free%2Fx/v1/chat/completions",
		"/r/free%2fx/v1/responses",
		"/r/../v1/responses",
	} {
		t.Run(p, func(t *testing.T) {
			resp := rawRequest(t, h, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", p, clientKey, len(body), body))
			if !strings.HasPrefix(resp, "HTTP/1.1 404 ") || strings.Contains(resp, "Location:") {
				t.Fatalf("got %q", resp)
			}
			if !strings.Contains(resp, `"code":"model_not_found"`) || !strings.Contains(resp, `"param":"model"`) || !strings.Contains(resp, "X-Request-Id: req_") {
				t.Errorf("not the model_not_found envelope: %q", resp)
			}
			// The message names the path, not a route it seems to hold.
			if want := `"message":"path \"` + p + `\" names no route: route paths are matched as sent`; !strings.Contains(resp, want) {
				t.Errorf("message: want %s in %q", want, resp)
			}
			id := resp[strings.Index(resp, "X-Request-Id: ")+len("X-Request-Id: "):]
			id = id[:strings.Index(id, "\r")]
			if ev := h.sink.waitEvent(t, id); ev.Status != 404 || ev.ErrorCode != "model_not_found" || ev.Outcome != "rejected" {
				t.Errorf("audit %+v", ev)
			}
		})
	}
	t.Run("GET models", func(t *testing.T) {
		resp := rawRequest(t, h, "GET /r/../v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+clientKey+"\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(resp, "HTTP/1.1 404 ") || !strings.Contains(resp, `"code":"model_not_found"`) || !strings.Contains(resp, `names no route`) {
			t.Errorf("got %q", resp)
		}
	})
	t.Run("other unclean paths", func(t *testing.T) {
		resp := rawRequest(t, h, "GET //v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+clientKey+"\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(resp, "HTTP/1.1 404 ") || !strings.Contains(resp, `"code":"not_found"`) {
			t.Errorf("got %q", resp)
		}
	})
	t.Run("auth first", func(t *testing.T) {
		resp := rawRequest(t, h, fmt.Sprintf("POST /r/../v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body))
		if !strings.HasPrefix(resp, "HTTP/1.1 401 ") {
			t.Errorf("got %q", resp)
		}
	})
	if n := h.up.Hits(); n != 0 {
		t.Errorf("upstream called %d times", n)
	}
	if r := h.post("/r/free/v1/chat/completions", body); r.Status != 200 {
		t.Errorf("clean path: %d %s", r.Status, r.Body)
	}
}

// echoKeyUpstream answers 401 with an error that quotes the key and the
// Authorization value it was sent, and another key-like string, gzipped when
// the request accepts gzip: what the passthrough's redaction must remove.
func echoKeyUpstream(w http.ResponseWriter, r *http.Request, c *upCall) {
	msg := `{"error":{"message":"Incorrect API key provided: ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") +
		` (header ` + r.Header.Get("Authorization") + `), also sk-abcdefghijkl12345","type":"invalid_request_error"}}`
	if r.Header.Get("Accept-Encoding") == "gzip" {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(msg))
		_ = zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		reply(w, 401, b.Bytes())
		return
	}
	reply(w, 401, []byte(msg))
}

// passthrough routes redact the upstream key from relayed error
// bodies, plain or gzip-encoded, as contract routes do.
func TestPassthroughRedactsErrorBodies(t *testing.T) {
	h := newHarness(t, echoKeyUpstream, cfg{})
	for _, enc := range []string{"", "gzip"} {
		t.Run("encoding "+enc, func(t *testing.T) {
			wantRedactedRelay(t, h, "/v1/chat/completions", `{"model":"raw-fast"}`, enc)
		})
	}
}

// wantRedactedRelay posts body to path (accepting enc) on a passthrough
// route whose upstream is echoKeyUpstream: the relayed 401 arrives decoded,
// with neither key nor the key-like string in it.
func wantRedactedRelay(t *testing.T, h *harness, path, body, enc string) {
	t.Helper()
	req, _ := http.NewRequest("POST", h.front.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	if enc != "" {
		req.Header.Set("Accept-Encoding", enc)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("status %d, encoding %q: %s", resp.StatusCode, resp.Header.Get("Content-Encoding"), b)
	}
	s := string(b)
	if strings.Contains(s, upstreamKey) || strings.Contains(s, clientKey) || strings.Contains(s, "sk-abcdefghijkl") ||
		!strings.Contains(s, "Incorrect API key provided: [redacted]") {
		t.Errorf("body %s", s)
	}
}

// after upstream 429s exhaust max_retries, the 502 carries the
// upstream's Retry-After.
func TestRetryAfterOnUpstream429(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		w.Header().Set("Retry-After", "1")
		reply(w, 429, []byte(`{"error":{"message":"slow down"}}`))
	}, cfg{})
	r := h.post("", `{"model":"free","messages":[`+userHi+`]}`)
	wantError(t, r, 502, "upstream_error", "upstream_error", nil)
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if h.up.Hits() != 3 {
		t.Errorf("hits %d", h.up.Hits())
	}
	h2 := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 500, []byte(`{"error":{"message":"boom"}}`))
	}, cfg{})
	if r := h2.post("", `{"model":"free","messages":[`+userHi+`]}`); r.Header.Get("Retry-After") != "" {
		t.Errorf("Retry-After on a 502 after 5xx: %q", r.Header.Get("Retry-After"))
	}
	// The upstream's own value, whatever it is: "0" (retry at once) is
	// passed on, an HTTP-date as the seconds left, an unreadable value
	// or none not at all; on the Responses edge too.
	for _, tc := range []struct{ sent, want, path, body string }{
		{"0", "0", "", `{"model":"free","messages":[` + userHi + `]}`},
		{time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat), "0", "", `{"model":"free","messages":[` + userHi + `]}`},
		{"soon", "", "", `{"model":"free","messages":[` + userHi + `]}`},
		{"", "", "", `{"model":"free","messages":[` + userHi + `]}`},
		{"1", "1", respPath, `{"model":"free","input":"hi"}`},
	} {
		h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
			if tc.sent != "" {
				w.Header().Set("Retry-After", tc.sent)
			}
			reply(w, 429, []byte(`{"error":{"message":"slow down"}}`))
		}, cfg{})
		r := h.post(tc.path, tc.body)
		wantError(t, r, 502, "upstream_error", "upstream_error", nil)
		if got, has := r.Header["Retry-After"]; tc.want == "" && has || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
			t.Errorf("upstream Retry-After %q: the 502 has %q, want %q", tc.sent, got, tc.want)
		}
	}
}

// A client that leaves during its upload is audited 499, not 400.
func TestClientLeavesDuringUpload(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	c, err := net.Dial("tcp", h.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{\"model\":", clientKey)
	time.Sleep(50 * time.Millisecond)
	c.Close()
	ev := h.sink.waitEvent(t, "")
	if ev.Status != 499 || ev.Outcome != "rejected" || ev.ErrorCode != "client_closed_request" {
		t.Errorf("audit %+v", ev)
	}
}
