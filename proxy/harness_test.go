package proxy

// Test harness: a scripted fake upstream that records what it received
// (testkit.Upstream), a config compiled from YAML with config.LoadBytes, a
// Server in front (httptest), an in-memory audit sink (testkit.AuditSink)
// and a goroutine-leak check.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/internal/testkit/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const (
	clientKey   = "client-key-1"
	clientKeys  = "client-key-1, client-key-2"
	upstreamKey = "sk-upstream-secret-"
)

// ---------------------------------------------------------------- upstream

// upCall is one request the fake upstream received (N, Header, Body, JSON,
// Ctx; Temperature and Messages read the JSON).
type upCall = testkit.Call

type upHandler = testkit.Handler

// fakeUpstream is an OpenAI-compatible upstream scripted per call.
type fakeUpstream = testkit.Upstream

// newFakeUpstream serves h on /v1/chat/completions (any other path: 404,
// still recorded).
func newFakeUpstream(t *testing.T, h upHandler) *fakeUpstream {
	t.Helper()
	return testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
			return
		}
		h(w, r, c)
	})
}

// completion is an upstream chat completion body.
func completion(content string, finish string, prompt, compl int) []byte {
	return testkit.Completion{ID: "chatcmpl-up-1", Model: "test-model-1-2024-08-06", Fingerprint: "fp_up",
		Content: content, Finish: finish, PromptTokens: prompt, CompletionTokens: compl}.JSON()
}

func reply(w http.ResponseWriter, status int, body []byte) { testkit.Reply(w, status, body) }

// Outputs used across tests.
const (
	validClassify   = `{"intent":"claim","summary":"window broke","evidence":["window broke"]}`
	validAnswer     = `{"answer":"forty-two"}`
	rejectedMarker  = "ZZ-REJECTED-OUTPUT-MARKER"
	invalidClassify = `{"intent":"claim","notes":"` + rejectedMarker + `"}` // summary missing, extra key
	invalidAnswer   = `Sure! {"answer":"` + rejectedMarker + `"}`           // prose around JSON
)

// byTemperature answers invalid at temperature > 0 and valid at 0 (the
// default plan's attempt 2), with usage (10,5) and (8,4).
func byTemperature(invalid, valid string) upHandler {
	return func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if c.Temperature() > 0 {
			reply(w, 200, completion(invalid, "stop", 10, 5))
			return
		}
		reply(w, 200, completion(valid, "stop", 8, 4))
	}
}

func always(content string) upHandler {
	return func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, completion(content, "stop", 10, 5))
	}
}

// ------------------------------------------------------------------ config

// cfg are the knobs of the test config.
type cfg struct {
	RequestTimeout string // server.request_timeout, default 5s
	UpTimeout      string // upstreams up and up-mct: timeout, default 2s (tests of the timeout set it short)
	MaxBody        int    // server.max_body_bytes, default 4096
	ClassifyTemp   string // classify route temperature, default 0.7
	Drop           []string
	IncludeContent bool
	ServerExtra    string // more server keys, each line "  key: value"
}

const baseYAML = `
server:
  max_body_bytes: @MAX_BODY@
  request_timeout: @REQ_TIMEOUT@
  api_keys_env: CONTRACTD_TEST_CLIENT_KEYS
@SERVER_EXTRA@
audit:
  sink: none
  include_content: @INCLUDE@
upstreams:
  - name: up
    base_url: @UP@
    api_key_env: CONTRACTD_TEST_UPSTREAM_KEY
    timeout: @UP_TIMEOUT@
    max_retries: 2
  - name: up-mct
    base_url: @UP@
    api_key_env: CONTRACTD_TEST_UPSTREAM_KEY
    timeout: @UP_TIMEOUT@
    max_retries: 2
    max_tokens_param: max_completion_tokens
  - name: up-slow
    base_url: @UP@
    api_key_env: CONTRACTD_TEST_UPSTREAM_KEY
    timeout: 2s
    max_retries: 0
labels:
  - name: intent
    values: [claim, billing, other]
prompts:
@CLASSIFY_PROMPT@  - name: freeform
    system: |
      Answer the user's question as JSON: {{ schema }}
contracts:
  - name: classify_v1
    schema_file: contracts/classify.schema.json
    policies:
      labels: [{path: /intent, set: intent}]
      evidence: [{path: /evidence/*, source: /body}]
  - name: answer_v1
    schema:
      type: object
      required: [answer]
      additionalProperties: false
      properties: {answer: {type: string}}
    policies:
      forbidden: [{name: secret, path: /answer, pattern: "(?i)forbidden-word"}]
routes:
`

var routeYAML = map[string]string{
	"classify": `
  - name: classify
    upstream: up
    model: test-model-1
    prompt: classify
    contract: classify_v1
    temperature: @CLASSIFY_TEMP@
    max_output_tokens: 300
    seed: 7
    response_format: json_object
`,
	"free": `
  - name: free
    upstream: up
    model: test-model-1
    prompt: freeform
    contract: answer_v1
    temperature: 0.5
    max_output_tokens: 100
`,
	"free-drop": `
  - name: free-drop
    upstream: up-mct
    model: test-model-2
    prompt: freeform
    contract: answer_v1
    temperature: 1
    max_output_tokens: 64
    client_system: drop
    response_format: json_schema
    retry:
      - {temperature: 1}
      - {temperature: 0.2}
      - {temperature: 0, shorten: {ratio: 0.5, keep: head_tail}}
`,
	"tight": `
  - {name: tight, upstream: up, model: test-model-1, prompt: freeform, contract: answer_v1,
     temperature: 0.5, max_output_tokens: 50, budget: {max_input_tokens: 60, max_total_tokens: 600}}
`,
	"broke": `
  - {name: broke, upstream: up, model: test-model-1, prompt: freeform, contract: answer_v1,
     temperature: 0.5, max_output_tokens: 50, budget: {max_total_tokens: 10}}
`,
	"slow": `
  - name: slow
    upstream: up-slow
    model: test-model-1
    prompt: freeform
    contract: answer_v1
    temperature: 0.5
`,
	"raw": `
  - name: raw
    upstream: up-slow
    model: raw-upstream-model
    passthrough: true
`,
	"raw-fast": `
  - name: raw-fast
    upstream: up
    model: raw-upstream-model
    passthrough: true
`,
}

var routeOrder = []string{"classify", "free", "free-drop", "tight", "broke", "slow", "raw", "raw-fast"}

func configYAML(upURL string, c cfg) string {
	var b strings.Builder
	b.WriteString(baseYAML)
outer:
	for _, name := range routeOrder {
		for _, d := range c.Drop {
			if d == name {
				continue outer
			}
		}
		b.WriteString(routeYAML[name])
	}
	return strings.NewReplacer(
		"@UP@", upURL,
		"@MAX_BODY@", fmt.Sprint(testkit.Or(c.MaxBody, 4096)),
		"@REQ_TIMEOUT@", testkit.Or(c.RequestTimeout, "5s"),
		"@UP_TIMEOUT@", testkit.Or(c.UpTimeout, "2s"),
		"@CLASSIFY_TEMP@", testkit.Or(c.ClassifyTemp, "0.7"),
		"@INCLUDE@", fmt.Sprint(c.IncludeContent),
		"@SERVER_EXTRA@", c.ServerExtra,
		"@CLASSIFY_PROMPT@", testkit.ClassifyPrompt("Classify the email."),
	).Replace(b.String())
}

// loadRuntime compiles the test config. Its path sits in testdata so the
// contract's relative schema_file resolves against testdata/.
func loadRuntime(t testing.TB, upURL string, c cfg) *config.Runtime {
	t.Helper()
	return testkit.LoadRuntime(t, filepath.Join("testdata", "contractd.yaml"), configYAML(upURL, c))
}

// ------------------------------------------------------------------ server

// memSink keeps audit events in memory.
type memSink struct{ testkit.AuditSink }

// waitEvent waits for the audit event of request id ("": any).
func (m *memSink) waitEvent(t *testing.T, id string) audit.Event {
	t.Helper()
	return m.WaitEvent(t, id)
}

type harness struct {
	t      *testing.T
	up     *fakeUpstream
	rt     *config.Runtime
	srv    *Server
	caller *Caller
	front  *httptest.Server
	client *http.Client
	sink   *memSink
	cfg    cfg
}

func testKeys(u *config.Upstream) string {
	if u.APIKeyEnv == "" {
		return ""
	}
	return upstreamKey + u.Name
}

func testEnv(name string) string {
	if name == "CONTRACTD_TEST_CLIENT_KEYS" {
		return clientKeys
	}
	return ""
}

// setEnv makes srv read value for the variable name, the rest of its
// environment unchanged. Swap the config in again for keys it names to
// be read anew, as a reload reads them.
func setEnv(srv *Server, name, value string) {
	env := srv.Env
	srv.Env = func(n string) string {
		if n == name {
			return value
		}
		return env(n)
	}
}

func newHarness(t *testing.T, h upHandler, c cfg) *harness {
	t.Helper()
	return newHarnessOn(t, newFakeUpstream(t, h), c)
}

// newHarnessOn puts a Server in front of up.
func newHarnessOn(t *testing.T, up *fakeUpstream, c cfg) *harness {
	t.Helper()
	return serveHarness(t, up, loadRuntime(t, up.URL(), c), c, &Admin{})
}

// serveHarness puts a Server running rt (built from c, or cfg{} when the
// test wrote its own config) in front of up: the test client keys, a 1 ms
// retry backoff, audit events kept in memory. admin is what the API
// listener also serves (nil: none).
func serveHarness(t *testing.T, up *fakeUpstream, rt *config.Runtime, c cfg, admin http.Handler) *harness {
	t.Helper()
	caller := NewCaller(testKeys)
	caller.Backoff = time.Millisecond
	sink := &memSink{}
	srv := NewServer(rt, caller, sink, nil)
	srv.Env = testEnv
	srv.Swap(rt) // again, now that Env reads the test's client keys
	front := httptest.NewServer(srv.Handler(admin))
	hs := &harness{t: t, up: up, rt: rt, srv: srv, caller: caller, front: front, sink: sink, cfg: c,
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	t.Cleanup(hs.Close)
	return hs
}

// Close shuts everything down and drops idle connections so goroutine
// counts settle.
func (h *harness) Close() {
	h.up.Close()
	h.front.Close()
	h.client.CloseIdleConnections()
	h.caller.Client.CloseIdleConnections()
}

// reload compiles the config with c and installs it.
func (h *harness) reload(c cfg) *config.Runtime {
	rt := loadRuntime(h.t, h.up.URL(), c)
	h.srv.Swap(rt)
	return rt
}

// result is a client-side response.
type result struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

func (r *result) errorObj() map[string]any {
	e, _ := r.JSON["error"].(map[string]any)
	return e
}

// post sends body to path (default route path) with the client key;
// hdr are extra "Name: value" headers ("Authorization:" alone removes it).
func (h *harness) post(path, body string, hdr ...string) *result {
	h.t.Helper()
	return h.do(context.Background(), path, strings.NewReader(body), int64(len(body)), hdr...)
}

func (h *harness) do(ctx context.Context, path string, body io.Reader, n int64, hdr ...string) *result {
	h.t.Helper()
	if path == "" {
		path = "/v1/chat/completions"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.front.URL+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+clientKey)
	testkit.SetHeaders(req.Header, hdr...)
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("POST %s: reading body: %v", path, err)
	}
	res := &result{Status: resp.StatusCode, Header: resp.Header, Body: b}
	_ = json.Unmarshal(b, &res.JSON)
	return res
}

// send makes one request with key as the bearer token (none when "")
// and reads its result.
func send(t *testing.T, c *http.Client, method, url, body, key string) *result {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	res := &result{Status: resp.StatusCode, Header: resp.Header, Body: b}
	_ = json.Unmarshal(b, &res.JSON)
	return res
}

// -------------------------------------------------------------- assertions

// wantError checks the OpenAI envelope: status, type, code and param
// (nil: JSON null), and that param is present either way.
func wantError(t *testing.T, r *result, status int, typ ErrorType, code ErrorCode, param *string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	e := r.errorObj()
	if e == nil {
		t.Fatalf("no error object: %s", r.Body)
	}
	if e["type"] != string(typ) || e["code"] != string(code) {
		t.Errorf("type/code %v/%v, want %s/%s; body %s", e["type"], e["code"], typ, code, r.Body)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("empty message: %s", r.Body)
	}
	p, present := e["param"]
	switch {
	case !present:
		t.Errorf("error.param missing: %s", r.Body)
	case param == nil && p != nil:
		t.Errorf("param %v, want null", p)
	case param != nil && p != *param:
		t.Errorf("param %v, want %q", p, *param)
	}
	wantRequestID(t, r)
}

func wantRequestID(t *testing.T, r *result) string {
	t.Helper()
	ids := r.Header.Values("X-Request-Id")
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "req_") {
		t.Errorf("X-Request-Id %q, want exactly one req_…", ids)
		return ""
	}
	return ids[0]
}

// wantContractHeaders checks X-Contract-Route/Attempts (attempts 0: absent).
func wantContractHeaders(t *testing.T, r *result, route string, attempts int) {
	t.Helper()
	if attempts == 0 {
		if v := r.Header.Values("X-Contract-Route"); len(v) > 0 {
			t.Errorf("X-Contract-Route %q on a response that ran no attempt", v)
		}
		if v := r.Header.Values("X-Contract-Attempts"); len(v) > 0 {
			t.Errorf("X-Contract-Attempts %q on a response that ran no attempt", v)
		}
		return
	}
	if got := r.Header.Get("X-Contract-Route"); got != route {
		t.Errorf("X-Contract-Route %q, want %q", got, route)
	}
	if got := r.Header.Get("X-Contract-Attempts"); got != fmt.Sprint(attempts) {
		t.Errorf("X-Contract-Attempts %q, want %d", got, attempts)
	}
}

// wantSuccess checks a 200 of content type ct with one request id and the
// contract headers of route after attempts.
func wantSuccess(t *testing.T, r *result, ct, route string, attempts int) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if got := r.Header.Get("Content-Type"); got != ct {
		t.Errorf("Content-Type %q, want %q", got, ct)
	}
	wantRequestID(t, r)
	wantContractHeaders(t, r, route, attempts)
}

// postCalls posts body to the default path, wants a 200 and n upstream
// calls, and returns both.
func (h *harness) postCalls(body string, n int, hdr ...string) (*result, []*upCall) {
	h.t.Helper()
	r := h.post("", body, hdr...)
	if r.Status != 200 {
		h.t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	calls := h.up.Calls()
	if len(calls) != n {
		h.t.Fatalf("upstream hits %d, want %d", len(calls), n)
	}
	return r, calls
}

func sp(s string) *string { return &s }

func templateData(in any) contracts.TemplateData { return contracts.TemplateData{Input: in} }

// checkGolden compares got with testdata/golden/name (rewritten by -update).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got, *update, "-update")
}

// --------------------------------------------------------------------- SSE

// readEvent reads one SSE event's data line(s) ("" at EOF).
func readEvent(br *bufio.Reader) (string, error) {
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return strings.Join(data, "\n"), err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if len(data) == 0 {
				continue
			}
			return strings.Join(data, "\n"), nil
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
}

// ------------------------------------------------------------------- leaks

// noLeaks records the goroutine count; the returned func waits (after the
// caller closed servers and idle connections) for it to settle back.
func noLeaks(t *testing.T) func() {
	t.Helper()
	return testkit.GoroutineCheck(t)
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
