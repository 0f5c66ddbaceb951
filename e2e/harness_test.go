package e2e

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// Fake keys only: the client's key (checked by contractd) and the
// upstream's key (sent by contractd to the fake upstream).
const (
	clientKey   = "sk-test-e2e-client"
	upstreamKey = "sk-test-e2e-upstream"
	// testVersion is stamped into the binary TestMain builds.
	testVersion = "v0.0.0-e2e"
)

var (
	binPath string // the contractd binary under test
	builtBy string // "TestMain" or "CONTRACTD_E2E_BIN"
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	bin, by, cleanup, err := testkit.MainBinary("..", "-X main.version="+testVersion)
	defer cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binPath, builtBy = bin, by
	// The replica tests share one throwaway PostgreSQL, started on first
	// use and stopped when the tests end.
	return testkit.PostgresMain(m)
}

// baseEnv is the environment of every contractd process: a minimal one,
// never the developer's (which might hold a real OPENAI_API_KEY).
func baseEnv() map[string]string {
	return map[string]string{
		"PATH":               os.Getenv("PATH"),
		"HOME":               os.Getenv("HOME"),
		"TMPDIR":             os.TempDir(),
		"CONTRACTD_API_KEYS": clientKey,
		"OPENAI_API_KEY":     upstreamKey,
	}
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// ---------------------------------------------------------------------------
// The contractd process.

// lineLog collects a process's output, line by line, safely for concurrent
// readers.
type lineLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.buf.Next(i + 1)[:i]))
	}
	return len(p), nil
}

func (l *lineLog) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.lines...)
	if l.buf.Len() > 0 {
		out = append(out, l.buf.String())
	}
	return out
}

func (l *lineLog) String() string { return strings.Join(l.Lines(), "\n") }

// JSON returns the lines that are JSON objects, decoded.
func (l *lineLog) JSON() []map[string]any {
	var out []map[string]any
	for _, s := range l.Lines() {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// daemon is one `contractd serve` process.
type daemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	stderr *lineLog // JSON log lines
	stdout *lineLog // audit events (sink: stdout)
	done   chan struct{}
	err    error // cmd.Wait's result, set before done is closed

	API   string // host:port of the API listener
	Admin string // host:port of the admin listener ("" when none)
}

// startProcess starts `contractd args...` and kills it when the test ends.
func startProcess(t testing.TB, env map[string]string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, stderr: &lineLog{}, stdout: &lineLog{}, done: make(chan struct{})}
	d.cmd = exec.Command(binPath, args...)
	d.cmd.Env = envList(env)
	d.cmd.Stdout = d.stdout
	d.cmd.Stderr = d.stderr
	d.cmd.Dir = t.TempDir()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting contractd: %v", err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("contractd stderr:\n%s", d.stderr)
			t.Logf("contractd stdout:\n%s", d.stdout)
		}
	})
	return d
}

// startDaemon runs `contractd serve -c cfg` and waits for its listeners.
func startDaemon(t testing.TB, cfg string, env map[string]string) *daemon {
	t.Helper()
	d := startProcess(t, env, "serve", "-c", cfg)
	d.awaitListening(cfg)
	return d
}

// awaitListening waits until the process logged every listener cfg names.
func (d *daemon) awaitListening(cfg string) {
	t := d.t
	t.Helper()
	want := 1
	if strings.Contains(readFile(t, cfg), "admin_listen: 127.0.0.1:0") {
		want = 2
	}
	ok := waitFor(10*time.Second, func() bool {
		for _, m := range d.stderr.JSON() {
			if m["msg"] != "listening" {
				continue
			}
			switch m["kind"] {
			case "api":
				d.API, _ = m["addr"].(string)
			case "admin":
				d.Admin, _ = m["addr"].(string)
			}
		}
		n := 0
		if d.API != "" {
			n++
		}
		if d.Admin != "" {
			n++
		}
		return n == want || d.exited()
	})
	if !ok || d.exited() {
		t.Fatalf("contractd did not start listening (exited=%v, err=%v):\n%s", d.exited(), d.err, d.stderr)
	}
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) BaseURL() string { return "http://" + d.API + "/v1" }

func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (d *daemon) wait(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.done:
	case <-time.After(timeout):
		d.t.Fatalf("contractd still running after %v:\n%s", timeout, d.stderr)
	}
	if d.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		return ee.ExitCode()
	}
	d.t.Fatalf("contractd wait: %v", d.err)
	return -1
}

// logLine waits for a JSON log line for which match is true.
func (d *daemon) logLine(timeout time.Duration, match func(map[string]any) bool) (map[string]any, bool) {
	var found map[string]any
	ok := waitFor(timeout, func() bool {
		for _, m := range d.stderr.JSON() {
			if match(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found, ok
}

// sighup sends SIGHUP and reports whether, within timeout, one more log
// line than before matches (reloaded or refused): the outcome of this
// reload, not of an earlier one.
func (d *daemon) sighup(timeout time.Duration, match func(map[string]any) bool) bool {
	d.t.Helper()
	n := d.countLog(match)
	d.signal(syscall.SIGHUP)
	return waitFor(timeout, func() bool { return d.countLog(match) > n })
}

// refusesToStart waits for a serve that must not start: it exits non-zero
// before it listens, and its stderr holds every one of why.
func (d *daemon) refusesToStart(why ...string) {
	d.t.Helper()
	if code := d.wait(10 * time.Second); code == 0 {
		d.t.Fatalf("serve started; want it refused, saying %q", why)
	}
	errText := d.stderr.String()
	for _, w := range why {
		if !strings.Contains(errText, w) {
			d.t.Errorf("stderr does not say %q:\n%s", w, errText)
		}
	}
	if strings.Contains(errText, `"listening"`) {
		d.t.Errorf("serve listened before refusing:\n%s", errText)
	}
}

func (d *daemon) countLog(match func(map[string]any) bool) int {
	n := 0
	for _, m := range d.stderr.JSON() {
		if match(m) {
			n++
		}
	}
	return n
}

func msgIs(msg string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["msg"] == msg }
}

// assertNoSecrets checks that neither key ever reached contractd's output
// (logs and audit events).
func (d *daemon) assertNoSecrets() {
	d.t.Helper()
	for name, out := range map[string]string{"stderr": d.stderr.String(), "stdout": d.stdout.String()} {
		for _, k := range []string{clientKey, upstreamKey} {
			if strings.Contains(out, k) {
				d.t.Errorf("contractd %s contains the key %q", name, k)
			}
		}
	}
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	return testkit.WaitFor(timeout, 10*time.Millisecond, cond)
}

// runCLI runs a one-shot contractd command and returns its outputs.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = envList(baseEnv())
	cmd.Dir = t.TempDir()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code = 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("contractd %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return so.String(), se.String(), code
}

// ---------------------------------------------------------------------------
// The fake upstream: an OpenAI-compatible server inside the test process,
// on 127.0.0.1, answering each request with a scripted reply.

type upstreamRequest struct {
	Method string
	Path   string
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

// reply is what the fake upstream sends back for one request.
type reply struct {
	Status  int
	Content string // choices[0].message.content of a chat completion
	Finish  string // finish_reason ("stop" when empty)
	Delay   time.Duration
	Raw     []byte // the body as is, instead of a completion
}

// fakeUpstream is a testkit.Upstream (which records every call) whose
// replies a script chooses.
type fakeUpstream struct {
	*testkit.Upstream
	script func(req upstreamRequest, n int) reply // n: 1-based index of this request
	got    chan upstreamRequest                   // every request, when non-nil (buffered)
}

// newUpstream starts a fake upstream; script chooses each reply.
func newUpstream(t testing.TB, script func(req upstreamRequest, n int) reply) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{script: script, got: make(chan upstreamRequest, 64)}
	u.Upstream = testkit.NewUpstream(t, u.serve)
	return u
}

func asRequest(c *testkit.Call) upstreamRequest {
	return upstreamRequest{Method: c.Method, Path: c.Path, Header: c.Header, Raw: c.Body, Body: c.JSON}
}

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
	req := asRequest(c)
	select {
	case u.got <- req:
	default:
	}
	rp := u.script(req, c.N)
	if rp.Delay > 0 {
		select {
		case <-time.After(rp.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if rp.Status == 0 {
		rp.Status = http.StatusOK
	}
	body := rp.Raw
	if body == nil {
		model, _ := req.Body["model"].(string)
		body = completion(model, rp.Content, rp.Finish)
	}
	testkit.Reply(w, rp.Status, body)
}

// Requests returns every request received so far.
func (u *fakeUpstream) Requests() []upstreamRequest {
	var out []upstreamRequest
	for _, c := range u.Calls() {
		out = append(out, asRequest(c))
	}
	return out
}

// assertKeys checks that every upstream request carried the upstream's key
// and that the client's key never reached the upstream, in any header or
// in the body.
func (u *fakeUpstream) assertKeys(t *testing.T) {
	t.Helper()
	reqs := u.Requests()
	if len(reqs) == 0 {
		t.Fatalf("the upstream saw no request")
	}
	for i, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
			t.Errorf("upstream request %d: Authorization %q, want the upstream's key", i+1, got)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, clientKey) {
					t.Errorf("upstream request %d: header %s carries the client's key", i+1, k)
				}
			}
		}
		if bytes.Contains(r.Raw, []byte(clientKey)) {
			t.Errorf("upstream request %d: body carries the client's key", i+1)
		}
	}
}

// completion is a minimal OpenAI chat completion.
func completion(model, content, finish string) []byte {
	return testkit.Completion{ID: "chatcmpl-fake", Model: model + "-2024-01-01", Fingerprint: "fp_fake",
		Content: content, Finish: finish, Logprobs: true, PromptTokens: 50, CompletionTokens: 10}.JSON()
}

// byModel is the default script: the route's upstream model name decides.
//
//	fake-good: a valid sentiment object
//	fake-bad:  prose, never valid (so every attempt fails: needs_review)
//	fake-slow: a valid object after slowDelay
//	fake-neutral: another valid object
//	fake-500:  an upstream failure (HTTP 500)
func byModel(req upstreamRequest, _ int) reply {
	switch req.Body["model"] {
	case "fake-good":
		return reply{Content: goodContent}
	case "fake-slow":
		return reply{Content: goodContent, Delay: slowDelay}
	case "fake-neutral":
		return reply{Content: neutralContent}
	case "fake-500":
		return reply{Status: http.StatusInternalServerError, Raw: []byte(`{"error":{"message":"boom","type":"server_error","code":null,"param":null}}`)}
	default:
		return reply{Content: "Sure! The sentiment is positive, I think."}
	}
}

const (
	goodContent    = `{"sentiment":"positive","summary":"Fast delivery and great food."}`
	neutralContent = `{"sentiment":"neutral","summary":"An ordinary meal."}`
	slowDelay      = 2 * time.Second
)

// ---------------------------------------------------------------------------
// Configs.

// baseConfig is the serving config the Node suite uses too; see its header.
//
//go:embed testdata/contractd.yaml
var baseConfig string

// inlineSchema is baseConfig's contract schema, from its key to the key
// after it, which renderConfig swaps for a schema_file.
var inlineSchema = regexp.MustCompile(`(?s)\n    schema:\n.*?\n    extraction:`)

type cfgOpts struct {
	upstream string
	server   string // more server keys (YAML lines "  key: value\n")
	audit    string // the audit keys in place of "sink: stdout" ("": that one)
	routes   string // extra route entries (YAML list items, 2-space indented)
	schema   string // "" for the inline schema; else the value of schema_file
}

func renderConfig(o cfgOpts) string {
	s := strings.ReplaceAll(baseConfig, "@UPSTREAM@", o.upstream)
	if o.server != "" {
		s = mustReplace(s, "\nserver:\n", "\nserver:\n"+o.server)
	}
	if o.audit != "" {
		s = mustReplace(s, "\naudit:\n  sink: stdout\n", "\naudit:\n  "+o.audit+"\n")
	}
	if o.schema != "" {
		s = inlineSchema.ReplaceAllLiteralString(s, "\n    schema_file: "+o.schema+"\n    extraction:")
	}
	return s + o.routes
}

// mustReplace is s with its first old replaced by new; it panics when s
// has no old (the base config has moved: a knob that silently did nothing
// would leave its test proving nothing).
func mustReplace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic(fmt.Sprintf("e2e: the base config has no %q", old))
	}
	return strings.Replace(s, old, new, 1)
}

// serveAudit starts contractd on a byModel fake upstream with the base
// config written to dir/contractd.yaml, its audit sink given by sink
// (cfgOpts.audit; a relative path is dir's), and returns the config's path
// (to start it again) and the daemon.
func serveAudit(t *testing.T, dir, sink string) (string, *daemon) {
	t.Helper()
	up := newUpstream(t, byModel)
	cfg := writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL(), audit: sink}))
	return cfg, startDaemon(t, cfg, baseEnv())
}

// serveBase starts contractd on a byModel fake upstream with the base
// config written to dir/contractd.yaml.
func serveBase(t *testing.T, dir string) (*fakeUpstream, *daemon) {
	t.Helper()
	up := newUpstream(t, byModel)
	return up, startDaemon(t, writeConfig(t, dir, renderConfig(cfgOpts{upstream: up.URL()})), baseEnv())
}

// edited is text with its first old replaced by new. A text without old
// fails the test: the base config has moved, and an edit that silently did
// nothing would leave the test proving nothing.
func edited(t testing.TB, text, old, new string) string {
	t.Helper()
	if !strings.Contains(text, old) {
		t.Fatalf("the config has no %q to edit", old)
	}
	return strings.Replace(text, old, new, 1)
}

// writeConfig writes text to dir/contractd.yaml and returns its path.
func writeConfig(t testing.TB, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "contractd.yaml")
	writeFile(t, p, text)
	return p
}

func writeFile(t testing.TB, p, text string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// extraRoute is one more contract route entry for a config.
func extraRoute(name, model string) string {
	return fmt.Sprintf(`  - name: %s
    upstream: fake
    model: %s
    prompt: review
    contract: sentiment_v1
    temperature: 0.7
    max_output_tokens: 200
`, name, model)
}

// ---------------------------------------------------------------------------
// Plain HTTP helpers (for what the SDKs do not show: headers, raw bodies).

// metrics is the admin listener's /metrics text.
func (d *daemon) metrics(t *testing.T) []byte {
	t.Helper()
	resp, err := http.Get("http://" + d.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// metricValue is the value of the unlabelled series name on /metrics as a
// whole number; -1 when the series is missing.
func (d *daemon) metricValue(t *testing.T, name string) int64 {
	t.Helper()
	for _, line := range strings.Split(string(d.metrics(t)), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return int64(f)
		}
	}
	return -1
}

// postOK posts text to review-sentiment (byModel answers it valid) and
// returns the request's id; any status but 200 fails the test.
func postOK(t *testing.T, d *daemon, text string) string {
	t.Helper()
	resp, body := post(t, d, reviewBody("review-sentiment", text))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	return resp.Header.Get("X-Request-Id")
}

// fileHolds reports whether the file at path can be read and holds s.
func fileHolds(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

func reviewBody(route, text string) string {
	b, _ := json.Marshal(map[string]any{
		"model":    route,
		"messages": []any{map[string]any{"role": "user", "content": reviewInput(text)}},
	})
	return string(b)
}

func reviewInput(text string) string {
	b, _ := json.Marshal(map[string]string{"text": text})
	return string(b)
}

var httpClient = &http.Client{Timeout: 20 * time.Second}

// post sends a chat completion request with the client's key.
func post(t *testing.T, d *daemon, body string) (*http.Response, []byte) {
	t.Helper()
	return postAs(t, d, clientKey, body)
}

// postAs is post with key as the bearer token; "" sends no Authorization
// header, as a client of a server without keys does.
func postAs(t *testing.T, d *daemon, key, body string) (*http.Response, []byte) {
	t.Helper()
	resp, b := sendChat(d, key, body)
	if resp == nil {
		t.Fatalf("POST: %s", b)
	}
	return resp, b
}

// postNoFatal is post for goroutines: a transport error returns a nil
// response and the error's text.
func postNoFatal(d *daemon, body string) (*http.Response, []byte) {
	return sendChat(d, clientKey, body)
}

// sendChat is the request behind post, postAs and postNoFatal.
func sendChat(d *daemon, key, body string) (*http.Response, []byte) {
	req, _ := http.NewRequest(http.MethodPost, d.BaseURL()+"/chat/completions", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// sendAs sends a request with key as the bearer token ("": none) and body
// ("": none, else JSON) and returns the response with its whole body; a
// transport or read error fails the test.
func sendAs(t *testing.T, method, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// modelIDs lists the routes contractd serves now (GET /v1/models).
func modelIDs(t *testing.T, d *daemon) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.BaseURL()+"/models", nil)
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/models: %v", err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models: status %d, %v", resp.StatusCode, err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// scanLines splits s into non-empty lines.
func scanLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			out = append(out, l)
		}
	}
	return out
}
