package faults

// A passthrough route's event stream under upstream faults. The stream is
// relayed event by event; when the upstream's stream breaks off (reset,
// cut mid-event, ended without its last event, request_timeout) the
// client gets the whole events before the break and then one well-formed
// error event, never a torn event or a clean end it could take for a
// finished stream, and the audit line says upstream_error.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/sse"
	openai "github.com/sashabaranov/go-openai"
)

const askPStream = `{"model":"p","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// chunkEvent is the i-th chat.completion.chunk event of a stream.
func chunkEvent(i int) string {
	return fmt.Sprintf(`data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"up-model","choices":[{"index":0,"delta":{"content":"x%d"}}]}`+"\n\n", i)
}

// sseUpstream answers every call with a 200 event stream whose body
// script writes (flush: send what was written).
func sseUpstream(t *testing.T, script func(w io.Writer, flush func(), r *http.Request)) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		script(w, func() { w.(http.Flusher).Flush() }, r)
	})
}

// streamEvents reads body as the SSE standard does and fails on a torn
// last event (bytes after the last blank line).
func streamEvents(t *testing.T, body []byte) []sse.Event {
	t.Helper()
	s := strings.ReplaceAll(string(body), "\r\n", "\n")
	if s != "" && !strings.HasSuffix(s, "\n\n") {
		t.Errorf("the stream ends inside an event: %q", tail(body))
	}
	var evs []sse.Event
	rd := sse.NewReader(strings.NewReader(string(body)))
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	return evs
}

func tail(b []byte) string {
	if len(b) > 200 {
		return "…" + string(b[len(b)-200:])
	}
	return string(b)
}

// wantStreamError checks a stream relayed up to a break: the chunk
// events before it, each whole, then one chat error event with code.
func wantStreamError(t *testing.T, r *result, chunks int, code string) {
	t.Helper()
	wantStreamErrorAfter(t, r, chunks, chunks, code)
}

// wantStreamErrorAfter is wantStreamError for a break after between min
// and max chunks (a reset may discard bytes the relay had not read yet).
func wantStreamErrorAfter(t *testing.T, r *result, min, max int, code string) {
	t.Helper()
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("status %d err %v, want a 200 stream ending in an error event; body %q", r.Status, r.Err, tail(r.Body))
	}
	evs := streamEvents(t, r.Body)
	chunks := len(evs) - 1
	if chunks < min || chunks > max {
		t.Fatalf("%d events, want %d to %d chunks and an error event: %q", len(evs), min, max, tail(r.Body))
	}
	for _, ev := range evs[:chunks] {
		if !json.Valid([]byte(ev.Data)) || !strings.Contains(ev.Data, "chat.completion.chunk") {
			t.Errorf("relayed event %q", ev.Data)
		}
	}
	var eb struct {
		Error map[string]any `json:"error"`
	}
	last := evs[chunks].Data
	if err := json.Unmarshal([]byte(last), &eb); err != nil || eb.Error == nil {
		t.Fatalf("last event %q is not an error envelope", last)
	}
	if eb.Error["type"] != "upstream_error" || eb.Error["code"] != code || eb.Error["message"] == "" {
		t.Errorf("error event %s, want upstream_error/%s", last, code)
	}
	if _, ok := eb.Error["param"]; !ok {
		t.Errorf("error event without param: %s", last)
	}
}

func wantAudit(t *testing.T, e *env, outcome string, status int, code string) {
	t.Helper()
	evs := e.audit.waitEvents(t, 1)
	ev := evs[len(evs)-1]
	if string(ev.Outcome) != outcome || ev.Status != status || ev.ErrorCode != code {
		t.Errorf("audit outcome %s status %d error_code %q, want %s %d %q", ev.Outcome, ev.Status, ev.ErrorCode, outcome, status, code)
	}
}

// goOpenAIStream reads the passthrough route's stream with go-openai and
// returns the contents it got and the error that ended it (io.EOF: the
// stream finished).
func goOpenAIStream(t *testing.T, e *env) ([]string, error) {
	t.Helper()
	c := openai.DefaultConfig(keyAlpha)
	c.BaseURL = e.url + "/v1"
	c.HTTPClient = e.client
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := openai.NewClientWithConfig(c).CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "p",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var got []string
	for {
		r, err := s.Recv()
		if err != nil {
			return got, err
		}
		if len(r.Choices) > 0 {
			got = append(got, r.Choices[0].Delta.Content)
		}
	}
}

func TestPassthroughStreamBreaks(t *testing.T) {
	scripts := map[string]func(w io.Writer, flush func(), r *http.Request){
		"cut mid-event": func(w io.Writer, flush func(), r *http.Request) {
			io.WriteString(w, chunkEvent(1)+chunkEvent(2)+`data: {"id":"chatcmpl-up","obj`)
		},
		"cut between lines of an event": func(w io.Writer, flush func(), r *http.Request) {
			io.WriteString(w, chunkEvent(1)+chunkEvent(2)+"event: chunk\n")
		},
		"no [DONE]": func(w io.Writer, flush func(), r *http.Request) {
			io.WriteString(w, chunkEvent(1)+chunkEvent(2))
		},
		"no [DONE], CRLF": func(w io.Writer, flush func(), r *http.Request) {
			io.WriteString(w, strings.ReplaceAll(chunkEvent(1)+chunkEvent(2), "\n", "\r\n"))
		},
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			noLeaks(t)
			e := newEnv(t, sseUpstream(t, script).URL(), opts{}, nil)
			wantStreamError(t, e.post(context.Background(), askPStream), 2, "upstream_error")
			wantAudit(t, e, "upstream_error", 200, "upstream_error")
			got, err := goOpenAIStream(t, e)
			var apiErr *openai.APIError
			if strings.Join(got, ",") != "x1,x2" || !errors.As(err, &apiErr) || apiErr.Code != "upstream_error" {
				t.Errorf("go-openai got %v then %v (%T), want x1,x2 then the upstream_error API error", got, err, err)
			}
		})
	}
	t.Run("reset after two events", func(t *testing.T) {
		noLeaks(t)
		up := newRawUpstream(t, func(c *net.TCPConn, n int) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + chunkEvent(1) + chunkEvent(2) + `data: {"id":`))
			time.Sleep(20 * time.Millisecond)
			reset(c)
		})
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askPStream)
		if r.Status == 502 { // the reset discarded even the head: the error envelope
			wantError(t, r, 502, "upstream_error", "upstream_error")
			return
		}
		wantStreamErrorAfter(t, r, 0, 2, "upstream_error")
		wantAudit(t, e, "upstream_error", 200, "upstream_error")
	})
	t.Run("trickle past request_timeout", func(t *testing.T) {
		// The first event, then the second one byte every 20 ms: part of
		// it has come when request_timeout ends the exchange.
		noLeaks(t)
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) {
			io.WriteString(w, chunkEvent(1))
			for _, b := range []byte(chunkEvent(2)) {
				if _, err := w.Write([]byte{b}); err != nil {
					return
				}
				flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
		e := newEnv(t, up.URL(), opts{RequestTimeout: "600ms"}, nil)
		r := e.post(context.Background(), askPStream)
		wantStreamError(t, r, 1, "upstream_timeout")
		if r.Elapsed > 2*time.Second {
			t.Errorf("answered after %v", r.Elapsed)
		}
		wantAudit(t, e, "upstream_error", 200, "upstream_timeout")
	})
	t.Run("event over the hold bound, then the body ends", func(t *testing.T) {
		// An event too long to hold back goes out as it comes; if the
		// stream breaks inside it, no event can follow it well-formed,
		// so the client's connection fails rather than end cleanly. (The
		// body ends cleanly here: a reset could discard unread bytes
		// before the relay passed the bound.)
		noLeaks(t)
		long := `data: {"x":"` + strings.Repeat("a", 600<<10)
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) { io.WriteString(w, chunkEvent(1)+long) })
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askPStream)
		if r.Err == nil {
			t.Fatalf("status %d, %d bytes, clean end; want the connection to fail", r.Status, len(r.Body))
		}
		wantAudit(t, e, "upstream_error", 200, "upstream_error")
	})
}

func TestPassthroughStreamEnds(t *testing.T) {
	t.Run("[DONE] then more, then a hang", func(t *testing.T) {
		// [DONE] ends the relay: what follows is not relayed and an
		// upstream that keeps the connection open does not hold the
		// client (an SDK reading to the end would wait for request_timeout).
		noLeaks(t)
		var up *upstream
		up = sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) {
			io.WriteString(w, chunkEvent(1)+"data: [DONE]\n\n"+chunkEvent(2))
			flush()
			up.hang(r)
		})
		e := newEnv(t, up.URL(), opts{RequestTimeout: "3s"}, nil)
		r := e.post(context.Background(), askPStream)
		if r.Err != nil || string(r.Body) != chunkEvent(1)+"data: [DONE]\n\n" {
			t.Errorf("err %v body %q, want event 1 and [DONE]", r.Err, r.Body)
		}
		if r.Elapsed > time.Second {
			t.Errorf("answered after %v, want at once after [DONE]", r.Elapsed)
		}
		wantAudit(t, e, "passthrough", 200, "")
		up.waitCanceled(t, 1, time.Second)
	})
	t.Run("relayed as sent", func(t *testing.T) {
		// Comments, CRLF, an event split across writes, a long event,
		// invalid JSON in an event (passthrough does not judge
		// content), an upstream error event: relayed byte for byte.
		noLeaks(t)
		long := `data: {"x":"` + strings.Repeat("b", 2<<20) + "\"}\n\n"
		parts := []string{": keep-alive\r\n\r\n", strings.ReplaceAll(chunkEvent(1), "\n", "\r\n"), ":ping\n",
			chunkEvent(2)[:20], chunkEvent(2)[20:], "data: {nope\n\n", long, "data: [DONE]\r\n\r\n"}
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) {
			for _, p := range parts {
				io.WriteString(w, p)
				flush()
				time.Sleep(2 * time.Millisecond)
			}
		})
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askPStream)
		if want := strings.Join(parts, ""); r.Err != nil || string(r.Body) != want {
			t.Errorf("err %v, relayed %d bytes %q, want %d bytes as sent", r.Err, len(r.Body), tail(r.Body), len(want))
		}
		wantAudit(t, e, "passthrough", 200, "")
	})
	t.Run("upstream error event ends the stream", func(t *testing.T) {
		noLeaks(t)
		const errEv = `data: {"error":{"message":"overloaded","type":"server_error","code":null,"param":null}}` + "\n\n"
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) { io.WriteString(w, chunkEvent(1)+errEv) })
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askPStream)
		if r.Err != nil || string(r.Body) != chunkEvent(1)+errEv {
			t.Errorf("err %v body %q, want the upstream's events", r.Err, r.Body)
		}
		wantAudit(t, e, "passthrough", 200, "")
	})
	t.Run("[DONE] without its blank line", func(t *testing.T) {
		noLeaks(t)
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) { io.WriteString(w, chunkEvent(1)+"data: [DONE]") })
		e := newEnv(t, up.URL(), opts{}, nil)
		r := e.post(context.Background(), askPStream)
		if r.Err != nil || string(r.Body) != chunkEvent(1)+"data: [DONE]\n\n" {
			t.Errorf("err %v body %q, want event 1 and [DONE] completed", r.Err, r.Body)
		}
		wantAudit(t, e, "passthrough", 200, "")
	})
	t.Run("a keep-alive comment goes out at once", func(t *testing.T) {
		noLeaks(t)
		release := make(chan struct{})
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) {
			io.WriteString(w, ": keep-alive\n")
			flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "\n"+chunkEvent(1)+"data: [DONE]\n\n")
		})
		e := newEnv(t, up.URL(), opts{}, nil)
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(askPStream))
		req.Header.Set("Authorization", "Bearer "+keyAlpha)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got := make([]byte, 64)
		n, err := io.ReadAtLeast(resp.Body, got, len(": keep-alive\n"))
		close(release)
		if err != nil || string(got[:n]) != ": keep-alive\n" {
			t.Errorf("read %q, %v; want the comment before the upstream sends more", got[:n], err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	})
}

// The Responses API's passthrough stream: its last event is
// response.completed (or failed, incomplete, error); a break before it
// ends in an `event: error` whose data has the error member the openai
// SDKs raise.
func TestPassthroughResponsesStreamBreaks(t *testing.T) {
	const created = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_up\",\"status\":\"in_progress\"}}\n\n"
	const completed = "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_up\",\"status\":\"completed\"}}\n\n"
	post := func(e *env) *result {
		return e.postTo(context.Background(), "/v1/responses", `{"model":"p","input":"hi","stream":true}`)
	}
	t.Run("whole", func(t *testing.T) {
		noLeaks(t)
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) { io.WriteString(w, created+completed) })
		e := newEnv(t, up.URL(), opts{}, nil)
		if r := post(e); r.Err != nil || string(r.Body) != created+completed {
			t.Errorf("err %v body %q", r.Err, r.Body)
		}
		wantAudit(t, e, "passthrough", 200, "")
	})
	t.Run("cut before response.completed", func(t *testing.T) {
		noLeaks(t)
		up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) { io.WriteString(w, created+completed[:40]) })
		e := newEnv(t, up.URL(), opts{}, nil)
		r := post(e)
		evs := streamEvents(t, r.Body)
		if r.Err != nil || len(evs) != 2 || evs[0].Type != "response.created" || evs[1].Type != "error" {
			t.Fatalf("err %v events %+v", r.Err, evs)
		}
		var d struct {
			Type  string         `json:"type"`
			Code  string         `json:"code"`
			Error map[string]any `json:"error"`
		}
		if err := json.Unmarshal([]byte(evs[1].Data), &d); err != nil || d.Type != "error" || d.Code != "upstream_error" || d.Error["code"] != "upstream_error" {
			t.Errorf("error event %s", evs[1].Data)
		}
		wantAudit(t, e, "upstream_error", 200, "upstream_error")
	})
}

// A contract route decides before it streams: under every upstream fault a
// stream:true request gets what the same request without stream gets (the
// same status, error code and attempts header, the same number of upstream
// calls: the retry plan runs as for any request), as a JSON error, never a
// stream; and a valid verdict streams, on the chat edge chunks ending in
// [DONE], on the Responses API's edge its event sequence, each with its
// sequence_number, the text in one delta.
func TestContractStreamUnderUpstreamFaults(t *testing.T) {
	faults := map[string]func(up **upstream) func(w http.ResponseWriter, r *http.Request, n int){
		"valid": func(**upstream) func(http.ResponseWriter, *http.Request, int) { return okHandler },
		"5xx": func(**upstream) func(http.ResponseWriter, *http.Request, int) {
			return func(w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 503, []byte(`{"error":{"message":"busy"}}`))
			}
		},
		"invalid output": func(**upstream) func(http.ResponseWriter, *http.Request, int) {
			return func(w http.ResponseWriter, r *http.Request, n int) { reply(w, 200, completion(`{"answer":42}`)) }
		},
		"invalid then valid": func(**upstream) func(http.ResponseWriter, *http.Request, int) {
			return func(w http.ResponseWriter, r *http.Request, n int) {
				if n%2 == 1 {
					reply(w, 200, completion(`not json`))
					return
				}
				okHandler(w, r, n)
			}
		},
		"event stream unasked": func(**upstream) func(http.ResponseWriter, *http.Request, int) {
			return func(w http.ResponseWriter, r *http.Request, n int) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				io.WriteString(w, chunkEvent(1)+"data: [DONE]\n\n")
			}
		},
		"no headers": func(up **upstream) func(http.ResponseWriter, *http.Request, int) {
			return func(w http.ResponseWriter, r *http.Request, n int) { (*up).hang(r) }
		},
	}
	edges := []struct {
		name, path, plain, stream string
		wantValid                 func(t *testing.T, body []byte) // the stream of a valid verdict
	}{
		{"chat", "/v1/chat/completions", askC,
			`{"model":"c","stream":true,"messages":[{"role":"user","content":"What is six times seven?"}]}`, wantChatStream},
		{"responses", "/v1/responses", `{"model":"c","input":"What is six times seven?"}`,
			`{"model":"c","input":"What is six times seven?","stream":true}`, wantResponsesStream},
	}
	for name, fault := range faults {
		for _, edge := range edges {
			t.Run(edge.name+"/"+name, func(t *testing.T) {
				noLeaks(t)
				var up *upstream
				up = newUpstream(t, fault(&up))
				// An attempt counts as an upstream call once it reaches the
				// fake, so upstream_timeout must give it time to get there
				// under load: at 150 ms a hung stream request once counted 1
				// call where its plain twin counted 2.
				e := newEnv(t, up.URL(), opts{UpTimeout: "1s", MaxRetries: 1}, nil)
				plain := e.postTo(context.Background(), edge.path, edge.plain)
				hits := up.Hits()
				r := e.postTo(context.Background(), edge.path, edge.stream)
				if r.Err != nil || r.Status != plain.Status || up.Hits()-hits != hits ||
					r.Header.Get("X-Contract-Attempts") != plain.Header.Get("X-Contract-Attempts") {
					t.Fatalf("stream: %d %v, attempts %s, %d upstream calls; without stream: %d, attempts %s, %d calls",
						r.Status, r.Err, r.Header.Get("X-Contract-Attempts"), up.Hits()-hits, plain.Status, plain.Header.Get("X-Contract-Attempts"), hits)
				}
				ct := r.Header.Get("Content-Type")
				if r.Status != 200 {
					if ct != "application/json" || r.errField("code") != plain.errField("code") {
						t.Errorf("stream: %s %s, want the JSON error %s", ct, r.Body, plain.errField("code"))
					}
					return
				}
				if ct != "text/event-stream" {
					t.Fatalf("stream: %s %q", ct, r.Body)
				}
				edge.wantValid(t, r.Body)
			})
		}
	}
}

// wantChatStream checks a contract route's chat stream: chunks whose
// contents make validAnswer, then [DONE].
func wantChatStream(t *testing.T, body []byte) {
	t.Helper()
	evs := streamEvents(t, body)
	if len(evs) < 2 || !evs[len(evs)-1].IsDone() {
		t.Fatalf("stream: %q", body)
	}
	var content strings.Builder
	for _, ev := range evs[:len(evs)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("event %q", ev.Data)
		}
		for _, ch := range c.Choices {
			content.WriteString(ch.Delta.Content)
		}
	}
	if content.String() != validAnswer {
		t.Errorf("streamed content %q, want %s", content.String(), validAnswer)
	}
}

// wantResponsesStream checks a contract route's Responses API stream:
// its event sequence, each with its sequence_number, validAnswer in one
// delta.
func wantResponsesStream(t *testing.T, body []byte) {
	t.Helper()
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	evs := streamEvents(t, body)
	if len(evs) != len(want) {
		t.Fatalf("%d events: %q", len(evs), body)
	}
	for i, ev := range evs {
		var d struct {
			Type  string `json:"type"`
			Seq   *int   `json:"sequence_number"`
			Delta string `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || ev.Type != want[i] || d.Type != want[i] || d.Seq == nil || *d.Seq != i {
			t.Errorf("event %d: %s %s, want %s with sequence_number %d", i, ev.Type, ev.Data, want[i], i)
		}
		if d.Type == "response.output_text.delta" && d.Delta != validAnswer {
			t.Errorf("delta %q", d.Delta)
		}
	}
}

// A client that stops reading a passthrough stream holds the upstream
// back: contractd buffers a bounded amount (the relay's held event, the
// proxy's copy buffer and the sockets'), not the stream.
func TestPassthroughStreamSlowReader(t *testing.T) {
	noLeaks(t)
	var written atomic.Int64
	ev := []byte(chunkEvent(1))
	up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) {
		for written.Load() < 256<<20 {
			n, err := w.Write(ev)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	e := newEnv(t, up.URL(), opts{RequestTimeout: "10s"}, nil)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(askPStream))
	req.Header.Set("Authorization", "Bearer "+keyAlpha)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read nothing until the upstream's writes stall.
	var last int64 = -1
	for i := 0; i < 100 && written.Load() != last; i++ {
		last = written.Load()
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the upstream wrote %d KiB before its writes stalled", written.Load()>>10)
	if n := written.Load(); n > 64<<20 {
		t.Errorf("the upstream wrote %d MiB to a client that read nothing", n>>20)
	}
	resp.Body.Close()
}

// More streams than max_connections: the ones over the cap wait for a
// connection to close (max_connections) and are then served whole; none fails.
func TestPassthroughStreamsAtTheConnectionCap(t *testing.T) {
	noLeaks(t)
	up := sseUpstream(t, func(w io.Writer, flush func(), r *http.Request) {
		for i := 1; i <= 5; i++ {
			io.WriteString(w, chunkEvent(i))
			flush()
			time.Sleep(20 * time.Millisecond)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	e := newEnv(t, up.URL(), opts{MaxConnections: "3"}, &testTimeouts)
	// One connection per stream, none kept for a second request, so each
	// waiting stream takes a slot only once one closes.
	e.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const n = 12
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = askPStream
	}
	peak := make(chan int64, 1)
	stop := make(chan struct{})
	go func() {
		var m int64
		for {
			select {
			case <-stop:
				peak <- m
				return
			case <-time.After(2 * time.Millisecond):
				m = max(m, e.srv.LimitStats().Connections)
			}
		}
	}()
	for i, r := range e.postAll(bodies...) {
		evs := streamEvents(t, r.Body)
		if r.Err != nil || r.Status != 200 || len(evs) != 6 || !evs[5].IsDone() {
			t.Errorf("stream %d: %d %v, %d events", i, r.Status, r.Err, len(evs))
		}
	}
	close(stop)
	if p := <-peak; p > 3 {
		t.Errorf("%d connections open at once, cap 3", p)
	}
}
