package telemetry_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
)

// Model outputs the fake upstream returns per scenario and attempt.
const (
	outValid   = `{"intent":"billing_question"}`
	outProse   = "Sure! The intent is billing."
	outBadLbl  = `{"intent":"nonsense"}`
	outExtraKy = `{"intent":"other","extra":true}`
)

type wantViolation struct{ kind, path, rule string }

type wantAttempt struct {
	temp       float64
	shortened  bool
	finish     string
	upStatus   float64
	usage      [3]float64 // prompt, completion, total
	violations []wantViolation
	output     *string // the content the upstream returned; nil: no output
}

type wantEvent struct {
	route, outcome string
	status         float64
	code           string
	refs           bool   // prompt and contract are classify's
	input          string // exact contract_input bytes; "" when none was accepted
	attempts       []wantAttempt
	usage          [3]float64
	budget         []float64 // max_total_tokens, used; nil: null
}

func ptr(s string) *string { return &s }

var (
	usageOne = [3]float64{upPrompt, upCompletion, upTotal}
	usageTwo = [3]float64{2 * upPrompt, 2 * upCompletion, 2 * upTotal}
)

func wantEvents() map[string]wantEvent {
	okAttempt := func(temp float64, shortened bool) wantAttempt {
		return wantAttempt{temp: temp, shortened: shortened, finish: "stop", upStatus: 200, usage: usageOne, output: ptr(outValid)}
	}
	return map[string]wantEvent{
		"valid": {route: "classify", outcome: "valid", status: 200, refs: true, input: scenarioInput("valid"),
			attempts: []wantAttempt{okAttempt(0.7, false)}, usage: usageOne, budget: []float64{100000, upTotal}},
		"valid_path": {route: "classify", outcome: "valid", status: 200, refs: true, input: scenarioInput("valid"),
			attempts: []wantAttempt{okAttempt(0.7, false)}, usage: usageOne, budget: []float64{100000, upTotal}},
		"retry": {route: "classify", outcome: "valid", status: 200, refs: true, input: scenarioInput("retry"),
			attempts: []wantAttempt{
				{temp: 0.7, finish: "stop", upStatus: 200, usage: usageOne, output: ptr(outProse),
					violations: []wantViolation{{"parse", "", "not_json"}}},
				okAttempt(0, true),
			}, usage: usageTwo, budget: []float64{100000, 2 * upTotal}},
		"review": {route: "classify", outcome: "needs_review", status: 422, code: "contract_violation", refs: true, input: scenarioInput("review"),
			attempts: []wantAttempt{
				{temp: 0.7, finish: "stop", upStatus: 200, usage: usageOne, output: ptr(outBadLbl),
					violations: []wantViolation{{"policy", "/intent", "label"}}},
				{temp: 0, shortened: true, finish: "stop", upStatus: 200, usage: usageOne, output: ptr(outExtraKy),
					violations: []wantViolation{{"schema", "/extra", "additionalProperties"}}},
			}, usage: usageTwo, budget: []float64{100000, 2 * upTotal}},
		"fail": {route: "classify", outcome: "upstream_error", status: 502, code: "upstream_error", refs: true, input: scenarioInput("fail"),
			attempts: []wantAttempt{{temp: 0.7, upStatus: 500}}, budget: []float64{100000, 0}},
		"budget": {route: "classify-tight", outcome: "needs_review", status: 422, code: "budget_exhausted", refs: true, input: scenarioInput("budget"),
			attempts: []wantAttempt{{temp: 0.7, finish: "stop", upStatus: 200, usage: [3]float64{bigPrompt, bigCompletion, bigTotal}, output: ptr(outBadLbl),
				violations: []wantViolation{{"policy", "/intent", "label"}}}},
			usage: [3]float64{bigPrompt, bigCompletion, bigTotal}, budget: []float64{2000, bigTotal}},
		"bad_input": {route: "classify", outcome: "rejected", status: 400, code: "input_schema_violation", refs: true,
			budget: []float64{100000, 0}},
		"wrong_key":     {route: "", outcome: "rejected", status: 401, code: "invalid_api_key"},
		"unknown_route": {route: "nope", outcome: "rejected", status: 404, code: "model_not_found"},
		"passthrough": {route: "raw", outcome: "passthrough", status: 200,
			attempts: []wantAttempt{{upStatus: 200}}},
	}
}

var requestIDRe = regexp.MustCompile(`^req_[0-9a-f]{24}$`)

// TestAuditEvents asserts every field of the audit line of each
// kind of request (valid, retried, needs_review, budget_exhausted,
// upstream_error, rejected 400/401/404, passthrough), with include_content
// off (hashes only) and on (raw input and outputs added).
func TestAuditEvents(t *testing.T) {
	for _, include := range []bool{false, true} {
		name := "hashes_only"
		if include {
			name = "include_content"
		}
		t.Run(name, func(t *testing.T) {
			start := time.Now().UTC()
			h := newHarness(t, harnessOpts{includeContent: include})
			res := runScenarios(t, h)
			end := time.Now().UTC()

			raw := h.audit.String()
			if !strings.HasSuffix(raw, "\n") || strings.Count(raw, "\n") != len(res) {
				t.Fatalf("audit has %d lines for %d requests", strings.Count(raw, "\n"), len(res))
			}
			events := h.events()
			var passthroughUpBody string
			for _, c := range h.up.Calls() {
				if strings.Contains(string(c.Body), `"gpt-raw"`) {
					passthroughUpBody = string(c.Body)
				}
			}
			for _, sc := range scenarioOrder {
				want := wantEvents()[sc]
				t.Run(sc, func(t *testing.T) {
					r := res[sc]
					ev, ok := events[r.ID]
					if !ok {
						t.Fatalf("no audit event for request %s", r.ID)
					}
					checkEvent(t, h.rt, ev, want, r, include, start, end, passthroughUpBody)
				})
			}
		})
	}
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sameKeys(t *testing.T, what string, m map[string]any, want ...string) {
	t.Helper()
	sort.Strings(want)
	if got := keysOf(m); !reflect.DeepEqual(got, want) {
		t.Errorf("%s keys %v, want %v", what, got, want)
	}
}

func checkEvent(t *testing.T, rt *config.Runtime, ev map[string]any, want wantEvent, r result, include bool, start, end time.Time, passthroughUpBody string) {
	t.Helper()
	if want.outcome == "passthrough" {
		// The forwarded body (model replaced by the route's), byte for byte,
		// is a passthrough's input: hashed, and kept with include_content.
		if passthroughUpBody != strings.Replace(passthroughBody, `"model":"raw"`, `"model":"gpt-raw"`, 1) {
			t.Errorf("passthrough upstream body %s", passthroughUpBody)
		}
		want.input = passthroughUpBody
	}
	keys := []string{"event", "time", "request_id", "route", "outcome", "status", "duration_ms", "prompt", "contract",
		"input_sha256", "attempts", "usage", "budget", "api"}
	if want.code != "" {
		keys = append(keys, "error_code")
	}
	if include && want.input != "" {
		keys = append(keys, "input")
	}
	sameKeys(t, "event", ev, keys...)
	// Every scenario here comes in on the chat completions edge.
	if ev["api"] != "chat" {
		t.Errorf("api %v, want \"chat\"", ev["api"])
	}

	ts, _ := ev["time"].(string)
	tm, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || !strings.HasSuffix(ts, "Z") || tm.Before(start) || tm.After(end) {
		t.Errorf("time %q (%v) not a UTC RFC 3339 time within the test", ts, err)
	}
	if ev["request_id"] != r.ID || !requestIDRe.MatchString(r.ID) {
		t.Errorf("request_id %v, X-Request-Id %q", ev["request_id"], r.ID)
	}
	if ev["route"] != want.route {
		t.Errorf("route %v, want %q", ev["route"], want.route)
	}
	if ev["outcome"] != want.outcome {
		t.Errorf("outcome %v, want %q", ev["outcome"], want.outcome)
	}
	if ev["status"] != want.status || float64(r.Status) != want.status {
		t.Errorf("status %v (response %d), want %v", ev["status"], r.Status, want.status)
	}
	if want.code != "" && ev["error_code"] != want.code {
		t.Errorf("error_code %v, want %q", ev["error_code"], want.code)
	}
	dur, _ := ev["duration_ms"].(float64)
	if dur <= 0 || dur > float64(end.Sub(start).Microseconds())/1000 {
		t.Errorf("duration_ms %v outside (0, test time]", dur)
	}

	route := want.route
	if want.refs {
		refs := refsOf(t, rt, route)
		if p := ev["prompt"].(map[string]any); p["name"] != refs.prompt || p["sha256"] != refs.promptSHA {
			t.Errorf("prompt %v, want {%s %s}", p, refs.prompt, refs.promptSHA)
		}
		if c := ev["contract"].(map[string]any); c["name"] != refs.contract || c["sha256"] != refs.contractSHA {
			t.Errorf("contract %v, want {%s %s}", c, refs.contract, refs.contractSHA)
		}
	} else if ev["prompt"] != nil || ev["contract"] != nil {
		t.Errorf("prompt %v, contract %v: want null", ev["prompt"], ev["contract"])
	}

	wantInputSHA := ""
	switch {
	case want.input != "":
		wantInputSHA = sha256hex(want.input)
	}
	if ev["input_sha256"] != wantInputSHA {
		t.Errorf("input_sha256 %v, want %q", ev["input_sha256"], wantInputSHA)
	}
	if include && want.input != "" {
		var got, exp any
		b, _ := json.Marshal(ev["input"])
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal([]byte(want.input), &exp)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("input %s, want %s", b, want.input)
		}
	}

	checkUsage(t, "usage", ev["usage"], want.usage)
	if want.budget == nil {
		if ev["budget"] != nil {
			t.Errorf("budget %v, want null", ev["budget"])
		}
	} else if b, _ := ev["budget"].(map[string]any); b == nil || len(b) != 2 || b["max_total_tokens"] != want.budget[0] || b["used"] != want.budget[1] {
		t.Errorf("budget %v, want {max_total_tokens %v used %v}", ev["budget"], want.budget[0], want.budget[1])
	}

	atts, ok := ev["attempts"].([]any)
	if !ok || len(atts) != len(want.attempts) {
		t.Fatalf("attempts %v, want %d", ev["attempts"], len(want.attempts))
	}
	var latencies float64
	for i, wa := range want.attempts {
		a := atts[i].(map[string]any)
		what := "attempt " + string(rune('1'+i))
		akeys := []string{"attempt", "temperature", "shortened", "finish_reason", "upstream_status", "latency_ms",
			"usage", "violations", "output_sha256"}
		if include && wa.output != nil {
			akeys = append(akeys, "output")
		}
		sameKeys(t, what, a, akeys...)
		if a["attempt"] != float64(i+1) {
			t.Errorf("%s: attempt %v", what, a["attempt"])
		}
		if a["temperature"] != wa.temp {
			t.Errorf("%s: temperature %v, want %v", what, a["temperature"], wa.temp)
		}
		if a["shortened"] != wa.shortened {
			t.Errorf("%s: shortened %v, want %v", what, a["shortened"], wa.shortened)
		}
		if a["finish_reason"] != wa.finish {
			t.Errorf("%s: finish_reason %v, want %q", what, a["finish_reason"], wa.finish)
		}
		if a["upstream_status"] != wa.upStatus {
			t.Errorf("%s: upstream_status %v, want %v", what, a["upstream_status"], wa.upStatus)
		}
		lat, _ := a["latency_ms"].(float64)
		if lat <= 0 || lat > dur {
			t.Errorf("%s: latency_ms %v outside (0, duration_ms %v]", what, lat, dur)
		}
		latencies += lat
		checkUsage(t, what+" usage", a["usage"], wa.usage)
		// violations: always a list (empty for a clean attempt), sorted
		// (contracts.SortViolations).
		vs, isList := a["violations"].([]any)
		if !isList {
			t.Errorf("%s: violations %v, want a list", what, a["violations"])
		}
		if len(vs) != len(wa.violations) {
			t.Errorf("%s: violations %v, want %v", what, vs, wa.violations)
		} else {
			for j, wv := range wa.violations {
				v := vs[j].(map[string]any)
				sameKeys(t, what+" violation", v, "kind", "path", "rule", "message")
				if v["kind"] != wv.kind || v["path"] != wv.path || v["rule"] != wv.rule || v["message"] == "" {
					t.Errorf("%s: violation %v, want %v", what, v, wv)
				}
			}
		}
		wantSHA := ""
		if wa.output != nil {
			wantSHA = sha256hex(*wa.output)
		}
		if a["output_sha256"] != wantSHA {
			t.Errorf("%s: output_sha256 %v, want %q", what, a["output_sha256"], wantSHA)
		}
		if include && wa.output != nil && a["output"] != *wa.output {
			t.Errorf("%s: output %v, want %q", what, a["output"], *wa.output)
		}
	}
	if latencies > dur {
		t.Errorf("attempt latencies %v ms exceed the request's %v ms", latencies, dur)
	}
}

func checkUsage(t *testing.T, what string, v any, want [3]float64) {
	t.Helper()
	u, _ := v.(map[string]any)
	if u == nil || len(u) != 3 || u["prompt_tokens"] != want[0] || u["completion_tokens"] != want[1] || u["total_tokens"] != want[2] {
		t.Errorf("%s %v, want prompt/completion/total %v", what, v, want)
	}
}

type routeRefs struct{ prompt, promptSHA, contract, contractSHA string }

// refsOf reads a route's prompt and contract names and hashes.
func refsOf(t *testing.T, rt *config.Runtime, route string) routeRefs {
	t.Helper()
	rr := rt.Routes[route]
	if rr == nil || rr.Prompt == nil || rr.Contract == nil {
		t.Fatalf("route %s has no prompt or contract", route)
	}
	if len(rr.Prompt.SHA256) != 64 || len(rr.Contract.SHA256) != 64 {
		t.Fatalf("route %s hashes %q %q", route, rr.Prompt.SHA256, rr.Contract.SHA256)
	}
	return routeRefs{rr.Prompt.Name, rr.Prompt.SHA256, rr.Contract.Name, rr.Contract.SHA256}
}

// TestFileSinkBeforeResponse: with the file sink, each request's line is
// in the file (handed to the OS, readable through another descriptor) by
// the time its response has been read, for every kind of request.
func TestFileSinkBeforeResponse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	sink, err := audit.New("file", path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{sink: sink})
	do := func(name, body, key string) {
		t.Helper()
		resp, _ := h.post("/v1/chat/completions", key, body, nil)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Header.Get("X-Request-Id")
		if !strings.Contains(string(b), `"request_id":"`+id+`"`) {
			t.Errorf("%s: no line for %s in the file once the response was read", name, id)
		}
	}
	for _, sc := range []string{"valid", "retry", "review", "fail"} {
		do(sc, rawContractBody("classify", scenarioInput(sc)), clientKey)
	}
	do("budget", rawContractBody("classify-tight", scenarioInput("budget")), clientKey)
	do("rejected", rawContractBody("classify", `{"subject":"x"}`), clientKey)
	do("unauthorized", rawContractBody("classify", scenarioInput("valid")), wrongKey)
	do("passthrough (stream)", passthroughBody, clientKey)
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "\n"); n != 8 {
		t.Errorf("%d lines, want 8", n)
	}
}
