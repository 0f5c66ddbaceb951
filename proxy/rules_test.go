package proxy

// Rules of the attempt loop, the audit and the admin gate, each driven
// through the real handler against a scripted fake upstream. The config
// here is its own (rulesYAML), so the rules read next to the routes they
// need.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/retry"
)

const rulesYAML = `
server: {api_keys_env: CONTRACTD_TEST_CLIENT_KEYS}
audit: {sink: none}
upstreams:
  - {name: up, base_url: @UP@, api_key_env: CONTRACTD_TEST_UPSTREAM_KEY, timeout: 1s, max_retries: 1}
  - {name: nokey, base_url: @UP@, timeout: 1s, max_retries: 0}   # a local model: no api_key_env
prompts:
  - name: free
    system: "Answer as JSON."
contracts:
  - name: quote
    schema:
      type: object
      required: [quote]
      additionalProperties: false
      properties: {quote: {type: string}}
    policies:
      evidence: [{path: /quote}]   # no source: the last user message
routes:
  - {name: quote, upstream: up, model: m, prompt: free, contract: quote, temperature: 0.5}
  - {name: budgeted, upstream: up, model: m, prompt: free, contract: quote, temperature: 0.5,
     max_output_tokens: 10, budget: {max_total_tokens: 100000}}
  - {name: raw-nokey, upstream: nokey, model: local-model, passthrough: true}
  - {name: quote-nokey, upstream: nokey, model: local-model, prompt: free, contract: quote, temperature: 0.5}
  - name: three
    upstream: up
    model: m
    prompt: free
    contract: quote
    temperature: 0.7
    retry:
      - {temperature: 0.7}
      - {temperature: 0.3}
      - {temperature: 0, shorten: {ratio: 0.5, keep: head}}
`

// rulesHarness serves rulesYAML (plus routes, YAML list items) in front of
// an upstream answering hd; admin is what the API listener also serves
// (nil: none).
func rulesHarness(t *testing.T, hd upHandler, admin http.Handler, routes ...string) *harness {
	t.Helper()
	up := newFakeUpstream(t, hd)
	rt := testkit.LoadRuntime(t, filepath.Join("testdata", "contractd.yaml"), strings.ReplaceAll(rulesYAML+strings.Join(routes, ""), "@UP@", up.URL()))
	return serveHarness(t, up, rt, cfg{}, admin)
}

// noUsage is a chat completion without a usage member (some
// OpenAI-compatible servers send none).
func noUsage(content string) []byte {
	return mustJSON(map[string]any{"id": "chatcmpl-nousage", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}}})
}

const longQuestion = "the quick brown fox jumps over the lazy dog and then runs far away into the deep dark forest beyond the hills"

// Evidence without a source is looked up in the last user message as the
// client sent it, before any shortening. Attempt
// 2 sends a cut message that no longer holds the quote; the quote is still
// found, at its offset in the message as sent.
func TestEvidenceSourceIsTheMessageBeforeShortening(t *testing.T) {
	const quote = "deep dark forest"
	h := rulesHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if c.Temperature() > 0 {
			reply(w, 200, completion("not json", "stop", 10, 5))
			return
		}
		reply(w, 200, completion(`{"quote":"`+quote+`"}`, "stop", 8, 4))
	}, nil)
	r := h.post("", `{"model":"quote","messages":[{"role":"user","content":"`+longQuestion+`"}]}`)
	wantSuccess(t, r, "application/json", "quote", 2)
	calls := h.up.Calls()
	if len(calls) != 2 {
		t.Fatalf("upstream hits %d, want 2", len(calls))
	}
	msgs := calls[1].Messages()
	sent, _ := msgs[len(msgs)-1]["content"].(string)
	if strings.Contains(sent, quote) || len(sent) >= len(longQuestion) {
		t.Fatalf("test premise: attempt 2 sent %q, want a cut without the quote", sent)
	}
	start := strings.Index(longQuestion, quote) // ASCII: bytes are code points
	want := `"evidence":[{"path":"/quote","start":` + fmt.Sprint(start) + `,"end":` + fmt.Sprint(start+len(quote)) + `,"sha256":"` + sha([]byte(quote)) + `"}]`
	if !strings.Contains(string(r.Body), want) {
		t.Errorf("body %s\nlacks %s", r.Body, want)
	}
	ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
	if len(ev.Attempts) != 2 || ev.Attempts[0].Shortened || !ev.Attempts[1].Shortened {
		t.Errorf("audit attempts %+v", ev.Attempts)
	}
}

// The budget spends the upstream-reported total_tokens of earlier attempts,
// or the offline count of what was sent and received when the upstream
// reports none: an upstream without usage still spends budget.
func TestBudgetCountsOfflineWithoutUsage(t *testing.T) {
	h := rulesHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, noUsage("not json at all, just prose from the model"))
	}, nil)
	r := h.post("", `{"model":"budgeted","messages":[{"role":"user","content":"`+longQuestion+`"}]}`)
	wantError(t, r, 422, "needs_review", "contract_violation", nil)
	ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
	if ev.Usage.TotalTokens != 0 {
		t.Errorf("usage %+v: the upstream reported none, and reported usage is what is summed", ev.Usage)
	}
	if ev.Budget == nil || ev.Budget.Used <= 0 {
		t.Fatalf("budget %+v: want the offline count of what was sent and received", ev.Budget)
	}
	// Two attempts, each at least its question's words and the reply's.
	if min := 2 * (len(strings.Fields(longQuestion)) + 5); ev.Budget.Used < min {
		t.Errorf("budget used %d, want at least %d (two attempts counted offline)", ev.Budget.Used, min)
	}

	// The same count stops the plan. A total that holds attempt 1 exactly
	// (its input plus max_output_tokens) leaves nothing for attempt 2 once
	// attempt 1's offline count is spent; counted as 0, attempt 2 would run.
	in1 := retry.CountMessages(retry.CounterFor("m"), []string{"Answer as JSON.", longQuestion})
	h2 := rulesHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		reply(w, 200, noUsage("prose"))
	}, nil, fmt.Sprintf("  - {name: exact, upstream: up, model: m, prompt: free, contract: quote, temperature: 0.5,\n"+
		"     max_output_tokens: 10, budget: {max_total_tokens: %d}}\n", in1+10))
	r = h2.post("", `{"model":"exact","messages":[{"role":"user","content":"`+longQuestion+`"}]}`)
	wantError(t, r, 422, "needs_review", "budget_exhausted", nil)
	wantContractHeaders(t, r, "exact", 1)
	if got := h2.up.Hits(); got != 1 {
		t.Errorf("upstream hits %d, want 1 (attempt 2 over budget)", got)
	}
}

// GET endpoints are not audited; every chat request is, 4xx included.
func TestGETsAreNotAudited(t *testing.T) {
	h := rulesHarness(t, always(`{"quote":"hi"}`), &Admin{})
	for _, tc := range []struct {
		path, key string
		status    int
	}{
		{"/v1/models", clientKey, 200},
		{"/v1/models", "", 401},
		{"/r/quote/v1/models", clientKey, 200},
		{"/r/nope/v1/models", clientKey, 404},
		{"/v1/models/quote", clientKey, 200},
		{"/v1/models/nope", clientKey, 404},
		{"/r/quote/v1/models/quote", clientKey, 200},
		{"/v1/reviews/req_000000000000000000000000", clientKey, 404},
		{"/healthz", "", 200},
		{"/readyz", "", 503},
		{"/v1/chat/completions", clientKey, 404},
	} {
		if r := send(t, h.client, "GET", h.front.URL+tc.path, "", tc.key); r.Status != tc.status {
			t.Errorf("GET %s: status %d, want %d: %s", tc.path, r.Status, tc.status, r.Body)
		}
	}
	if evs := h.sink.Events(); len(evs) != 0 {
		t.Errorf("GETs wrote %d audit events: %+v", len(evs), evs)
	}
	// The POSTs around them are: a 200, a 404 and a 401.
	ok := h.post("", `{"model":"quote","messages":[{"role":"user","content":"hi"}]}`)
	nf := h.post("", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`)
	ua := h.post("", `{"model":"quote","messages":[{"role":"user","content":"hi"}]}`, "Authorization:")
	for _, r := range []*result{ok, nf, ua} {
		h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
	}
	if evs := h.sink.Events(); len(evs) != 3 {
		t.Errorf("audit events %d, want 3 (one per chat request)", len(evs))
	}
}

// An upstream failure is not a contract violation: after its transport
// retries (none for a 4xx other than 429) it is answered at once with 502
// or 504, and no further contract attempt runs. Here the failure comes on attempt 2
// of a three-attempt plan, after a contract violation: no attempt 3, no
// 422, and the headers count the two attempts that ran.
func TestUpstreamFailureEndsThePlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fail   func(w http.ResponseWriter)
		status int
		code   ErrorCode
		hits   int    // attempt 1, then attempt 2 with its transport retries
		upMsg  string // the upstream status, named in error.message
	}{
		{"4xx at once", func(w http.ResponseWriter) {
			reply(w, 400, []byte(`{"error":{"message":"bad"}}`))
		}, 502, CodeUpstreamError, 2, "400"},
		{"5xx after max_retries", func(w http.ResponseWriter) {
			reply(w, 503, []byte(`{"error":{"message":"busy"}}`))
		}, 502, CodeUpstreamError, 3, "503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := rulesHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
				if c.Temperature() == 0.7 {
					reply(w, 200, completion("not json", "stop", 10, 5))
					return
				}
				tc.fail(w)
			}, nil)
			r := h.post("", `{"model":"three","messages":[{"role":"user","content":"hi"}]}`)
			wantError(t, r, tc.status, "upstream_error", tc.code, nil)
			wantContractHeaders(t, r, "three", 2)
			if msg, _ := r.errorObj()["message"].(string); !strings.Contains(msg, tc.upMsg) {
				t.Errorf("message %q lacks the upstream status", msg)
			}
			if _, ok := r.errorObj()["review"]; ok {
				t.Errorf("an upstream failure carries a review: %s", r.Body)
			}
			calls := h.up.Calls()
			if len(calls) != tc.hits {
				t.Fatalf("upstream hits %d, want %d", len(calls), tc.hits)
			}
			for _, c := range calls {
				if c.Temperature() == 0 {
					t.Errorf("attempt 3 (temperature 0) ran after an upstream failure")
				}
			}
			ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
			if ev.Outcome != "upstream_error" || ev.Status != tc.status || len(ev.Attempts) != 2 || ev.Attempts[1].UpstreamStatus == 200 {
				t.Errorf("audit %+v attempts %+v", ev, ev.Attempts)
			}
		})
	}
}

// `shortened` is true when the content sent differs from attempt 1's,
// not whenever the attempt asks to shorten. A one-word message cannot be cut: the shortening
// attempt sends what attempt 1 sent and says so.
func TestShortenedOnlyWhenContentDiffers(t *testing.T) {
	h := rulesHarness(t, always("not json"), nil)
	for _, tc := range []struct {
		content string
		want    []bool
	}{
		{"hi", []bool{false, false, false}},
		{longQuestion, []bool{false, false, true}},
	} {
		before := len(h.up.Calls())
		r := h.post("", `{"model":"three","messages":[{"role":"user","content":"`+tc.content+`"}]}`)
		wantError(t, r, 422, "needs_review", "contract_violation", nil)
		calls := h.up.Calls()[before:]
		if len(calls) != 3 {
			t.Fatalf("upstream hits %d, want 3", len(calls))
		}
		atts, _ := r.errorObj()["review"].(map[string]any)["attempts"].([]any)
		ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
		for i, want := range tc.want {
			sentDiffers := string(calls[i].Body) != strings.Replace(string(calls[0].Body), `"temperature":0.7`, `"temperature":`+[]string{"0.7", "0.3", "0"}[i], 1)
			if sentDiffers != want {
				t.Fatalf("%q attempt %d: test premise: content differs %v, want %v\n%s", tc.content, i+1, sentDiffers, want, calls[i].Body)
			}
			if got := atts[i].(map[string]any)["shortened"]; got != want {
				t.Errorf("%q attempt %d: review shortened %v, want %v", tc.content, i+1, got, want)
			}
			if ev.Attempts[i].Shortened != want {
				t.Errorf("%q attempt %d: audit shortened %v, want %v", tc.content, i+1, ev.Attempts[i].Shortened, want)
			}
		}
	}
}

// The admin endpoints need no key on admin_listen; served on listen, all
// but /healthz and /readyz need a client key when client keys are
// configured. Client keys are configured here and no admin keys (with
// admin_keys_env set, every /admin/ request needs one of those instead).
func TestAdminKeyRule(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = io.WriteString(w, "contractd_requests_total 0\n")
	})
	h := rulesHarness(t, always(`{"quote":"hi"}`), nil)
	admin := &Admin{Metrics: metrics, Reviews: h.srv.ReviewAdmin()}
	admin.SetReady(true)
	onListen := httptest.NewServer(h.srv.Handler(admin))
	defer onListen.Close()
	// What serve puts on admin_listen.
	onAdmin := httptest.NewServer(h.srv.Deadlines(h.srv.AdminGate(admin, false)))
	defer onAdmin.Close()
	check := `{"contract":"quote","output":"{\"quote\":\"x\"}"}`
	for _, tc := range []struct {
		method, path, body string
		noKeyOnListen      int // status without a key on listen
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/metrics", "", 401},
		{"POST", "/admin/check", check, 401},
	} {
		t.Run(tc.path, func(t *testing.T) {
			want := 200
			// admin_listen: no key needed, and a wrong one is not held against it.
			for _, key := range []string{"", "wrong-key"} {
				r := send(t, h.client, tc.method, onAdmin.URL+tc.path, tc.body, key)
				if r.Status != want {
					t.Errorf("admin_listen, key %q: status %d, want %d: %s", key, r.Status, want, r.Body)
				}
				wantRequestID(t, r)
			}
			// listen: the client key.
			r := send(t, h.client, tc.method, onListen.URL+tc.path, tc.body, "")
			if r.Status != tc.noKeyOnListen {
				t.Errorf("listen, no key: status %d, want %d: %s", r.Status, tc.noKeyOnListen, r.Body)
			}
			if tc.noKeyOnListen == 401 {
				wantError(t, r, 401, "authentication_error", "invalid_api_key", nil)
				if r := send(t, h.client, tc.method, onListen.URL+tc.path, tc.body, "wrong-key"); r.Status != 401 {
					t.Errorf("listen, wrong key: status %d, want 401", r.Status)
				}
			}
			if r := send(t, h.client, tc.method, onListen.URL+tc.path, tc.body, clientKey); r.Status != want {
				t.Errorf("listen, client key: status %d, want %d: %s", r.Status, want, r.Body)
			}
		})
	}
}

// Passthrough routes replace the client's Authorization header with the
// upstream's key; an upstream without api_key_env (a local model) gets no
// Authorization at all, never the client's contractd key. Contract routes
// the same.
func TestKeylessUpstreamGetsNoClientKey(t *testing.T) {
	h := rulesHarness(t, always(`{"quote":"hi"}`), nil)
	for _, route := range []string{"raw-nokey", "quote-nokey"} {
		before := len(h.up.Calls())
		r := h.post("", `{"model":"`+route+`","messages":[{"role":"user","content":"hi"}]}`)
		if r.Status != 200 {
			t.Fatalf("%s: status %d: %s", route, r.Status, r.Body)
		}
		calls := h.up.Calls()[before:]
		if len(calls) != 1 {
			t.Fatalf("%s: upstream hits %d, want 1", route, len(calls))
		}
		if got := calls[0].Header.Values("Authorization"); len(got) != 0 {
			t.Errorf("%s: a keyless upstream got Authorization %q", route, got)
		}
		for k, vs := range calls[0].Header {
			for _, v := range vs {
				if strings.Contains(v, clientKey) {
					t.Errorf("%s: the client key reached the upstream in %s", route, k)
				}
			}
		}
	}
}

// A prompt that renders with the client's input but not with the input a
// later attempt shortens (here `slice` past the cut text's end) ends the
// plan there: the client has paid for attempt 1, which failed the
// contract, so it gets the 422 needs_review of the attempts made, as when
// the budget stops the next attempt, not a 400 blaming an input attempt 1
// accepted.
func TestShortenedInputThatCannotRender(t *testing.T) {
	const yaml = `
server: {api_keys_env: CONTRACTD_TEST_CLIENT_KEYS}
audit: {sink: none}
upstreams:
  - {name: up, base_url: @UP@, api_key_env: CONTRACTD_TEST_UPSTREAM_KEY, timeout: 1s, max_retries: 0}
prompts:
  - name: opening
    input_schema: {type: object, required: [body], properties: {body: {type: string}}}
    example_input: {body: "An example body that is long enough for the opening slice of the template."}
    system: "Answer as JSON."
    user: "Opening: {{ slice .Input.body 0 40 }}"
contracts:
  - name: answer
    schema: {type: object, required: [answer], additionalProperties: false, properties: {answer: {type: string}}}
routes:
  - name: opening
    upstream: up
    model: m
    prompt: opening
    contract: answer
    temperature: 0.7
    retry:
      - {temperature: 0.7}
      - {temperature: 0, shorten: {ratio: 0.1, keep: head}}
`
	up := newFakeUpstream(t, always("not json"))
	rt := testkit.LoadRuntime(t, filepath.Join("testdata", "contractd.yaml"), strings.ReplaceAll(yaml, "@UP@", up.URL()))
	h := serveHarness(t, up, rt, cfg{}, nil)
	body := `{"model":"opening","messages":[],"contract_input":{"body":"` + strings.Repeat("word ", 40) + `"}}`
	r := h.post("", body)
	wantError(t, r, 422, "needs_review", "contract_violation", nil)
	if h.up.Hits() != 1 {
		t.Errorf("upstream hits %d, want 1 (attempt 2 cannot be built)", h.up.Hits())
	}
	wantContractHeaders(t, r, "opening", 1)
	rv, _ := r.errorObj()["review"].(map[string]any)
	if atts, _ := rv["attempts"].([]any); len(atts) != 1 {
		t.Errorf("review attempts %v, want attempt 1 only", rv["attempts"])
	}
	if msg, _ := r.errorObj()["message"].(string); !strings.HasPrefix(msg, "needs review "+r.Header.Get("X-Request-Id")+": 1 attempts failed (not_json at root)") {
		t.Errorf("message %q", msg)
	}
	ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id"))
	if ev.Outcome != audit.OutcomeNeedsReview || ev.Status != 422 || len(ev.Attempts) != 1 {
		t.Errorf("audit outcome %q status %d attempts %d", ev.Outcome, ev.Status, len(ev.Attempts))
	}
}
