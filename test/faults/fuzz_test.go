package faults

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/sse"
	"github.com/contractd/contractd/proxy"
)

// memUpstream answers every call in memory with a valid completion, so a
// fuzz iteration costs no socket.
type memUpstream struct{}

func (memUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	body := completion(validAnswer)
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(body)),
		Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
}

var fuzzServer = sync.OnceValues(func() (*proxy.Server, *config.Runtime) {
	rt, err := config.LoadBytes("faults.yaml", []byte(configYAML("http://upstream.invalid/v1", opts{Keys: true, MaxBody: 1 << 16})))
	if err != nil {
		panic(err)
	}
	caller := proxy.NewCaller(upstreamKeys)
	caller.Client = &http.Client{Transport: memUpstream{}}
	srv := proxy.NewServer(rt, caller, audit.NewWriter(io.Discard), nil)
	srv.Env = testEnv
	srv.Swap(rt)
	return srv, rt
})

// allowed are the statuses a chat request may get (plus 429
// from the rate limit, which this config does not set).
var allowed = map[int]bool{200: true, 400: true, 401: true, 404: true, 413: true, 422: true, 502: true, 504: true}

// FuzzRequestReader throws arbitrary bodies (and a choice of path and
// key) at the chat endpoint and at proxy.Render. Nothing may panic; every
// answer is either a success of the right shape or an OpenAI error
// envelope with one of the statuses the API documents (clients switch on
// them).
func FuzzRequestReader(f *testing.F) {
	for _, s := range []string{
		askC, askP, `{}`, `[]`, `null`, ``, `{"model":"c"}`, `{"model":"nope","messages":[]}`,
		`{"model":"c","messages":[{"role":"system","content":"x"},{"role":"user","content":"y"}]}`,
		`{"model":"c","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"c","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"c","n":2,"messages":[]}`, `{"model":"c","tools":[],"messages":[]}`, `{"model":"c","tools":null,"messages":[{"role":"user","content":"a"}]}`,
		`{"model":"c","model":"p"}`, "{\"model\":\"c\xff\"}", `{"model":"c","messages":[{"role":"user","content":"\ud800"}]}`,
		`{"model":"c","messages":[` + strings.Repeat(`[`, 200) + `]}`, `{"model":"c","temperature":1e400,"messages":[]}`,
		`{"model":"c","contract_input":{"q":1},"messages":[]}`, `{"model":"c","messages":[{"role":"user"}]}`,
		`{"model":"c","messages":[{"role":"user","content":"hi"}]} trailing`, `{"model":"c","stream":"yes","messages":[]}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		srv, rt := fuzzServer()
		h := srv.Handler(nil)
		path := []string{"/v1/chat/completions", "/r/c/v1/chat/completions", "/r/p/v1/chat/completions", "/r/nope/v1/chat/completions"}[sel%4]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		if sel&4 == 0 {
			req.Header.Set("Authorization", "Bearer "+keyAlpha)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		out := rec.Body.Bytes()
		if !allowed[res.StatusCode] {
			t.Fatalf("status %d for %q: %s", res.StatusCode, body, out)
		}
		if !strings.HasPrefix(res.Header.Get("X-Request-Id"), "req_") {
			t.Fatalf("no X-Request-Id")
		}
		switch {
		case res.StatusCode != 200:
			var env struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(out, &env); err != nil || env.Error == nil {
				t.Fatalf("status %d without an error envelope: %q", res.StatusCode, out)
			}
			for _, k := range []string{"message", "type", "code", "param"} {
				if _, ok := env.Error[k]; !ok {
					t.Fatalf("error.%s missing: %s", k, out)
				}
			}
		case strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream"):
			rd := sse.NewReader(bytes.NewReader(out))
			done := false
			for {
				ev, err := rd.Next()
				if err != nil {
					break
				}
				if done {
					t.Fatalf("event after [DONE]")
				}
				if ev.IsDone() {
					done = true
				} else if !json.Valid([]byte(ev.Data)) {
					t.Fatalf("chunk is not JSON: %q", ev.Data)
				}
			}
			if !done {
				t.Fatalf("stream without [DONE]: %q", out)
			}
		case sel%4 != 2 && res.Header.Get("X-Contract-Route") == "c":
			var comp struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(out, &comp); err != nil || len(comp.Choices) != 1 || comp.Choices[0].Message.Content != validAnswer {
				t.Fatalf("contract success of the wrong shape: %s", out)
			}
		}
		// The offline renderer reads the same bodies.
		for _, route := range rt.RouteList {
			for n := 1; n <= 3; n++ {
				if b, err := proxy.Render(route, body, n); err == nil && !json.Valid(b) {
					t.Fatalf("Render(%s, %d) produced invalid JSON %q", route.Name, n, b)
				}
			}
		}
	})
}
