package telemetry_test

import (
	"net/http"
	"testing"
)

// Client-side trace context used by the propagation tests.
const (
	clientTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientParentID   = "00f067aa0ba902b7"
	clientTraceparnt = "00-" + clientTraceID + "-" + clientParentID + "-01"
)

// result is one scripted request's answer.
type result struct {
	Status int
	ID     string // X-Request-Id
	Header http.Header
	Body   []byte
	Sent   string // the request body, exact bytes
}

// passthroughBody is the scripted passthrough request (streamed).
const passthroughBody = `{"model":"raw","stream":true,"messages":[{"role":"user","content":"hello raw"}]}`

// scenarioOrder is the order runScenarios sends its requests in.
var scenarioOrder = []string{
	"valid", "valid_path", "retry", "review", "fail", "budget",
	"bad_input", "wrong_key", "unknown_route", "passthrough",
}

// runScenarios sends one request of every kind the tests assert on:
//
//	valid          classify, valid at once                        200 valid
//	valid_path     the same on /r/classify/v1/chat/completions    200 valid
//	retry          invalid at temperature 0.7, valid at 0         200 valid, 2 attempts
//	review         invalid at every attempt                       422 needs_review
//	fail           upstream 500 (no transport retry)              502 upstream_error
//	budget         classify-tight: attempt 1 spends the budget    422 needs_review (budget_exhausted)
//	bad_input      contract_input without body                    400 rejected (input_schema_violation)
//	wrong_key      a wrong client key                             401 rejected (invalid_api_key)
//	unknown_route  model "nope"                                   404 rejected (model_not_found)
//	passthrough    raw, SSE relayed                               200 passthrough
func runScenarios(t testing.TB, h *harness) map[string]result {
	t.Helper()
	out := map[string]result{}
	do := func(name, path, key, body string, want int) {
		t.Helper()
		resp, b := h.post(path, key, body, nil)
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d, want %d: %s", name, resp.StatusCode, want, b)
		}
		out[name] = result{Status: resp.StatusCode, ID: resp.Header.Get("X-Request-Id"), Header: resp.Header, Body: b, Sent: body}
	}
	const chat = "/v1/chat/completions"
	do("valid", chat, clientKey, rawContractBody("classify", scenarioInput("valid")), 200)
	do("valid_path", "/r/classify/v1/chat/completions", clientKey, rawContractBody("ignored", scenarioInput("valid")), 200)
	do("retry", chat, clientKey, rawContractBody("classify", scenarioInput("retry")), 200)
	do("review", chat, clientKey, rawContractBody("classify", scenarioInput("review")), 422)
	do("fail", chat, clientKey, rawContractBody("classify", scenarioInput("fail")), 502)
	do("budget", chat, clientKey, rawContractBody("classify-tight", scenarioInput("budget")), 422)
	do("bad_input", chat, clientKey, rawContractBody("classify", `{"subject":"SCENARIO-valid without a body"}`), 400)
	do("wrong_key", chat, wrongKey, rawContractBody("classify", scenarioInput("valid")), 401)
	do("unknown_route", chat, clientKey, rawContractBody("nope", scenarioInput("valid")), 404)
	do("passthrough", chat, clientKey, passthroughBody, 200)
	return out
}
