package proxy

// the error table, row by row, and the request-check order.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const (
	classifyMsg = `{"role":"user","content":"{\"subject\":\"Broken window\",\"body\":\"My window broke during the storm.\"}"}`
	userHi      = `{"role":"user","content":"hi"}`
)

func TestRequestErrors(t *testing.T) {
	huge := `{"model":"free","messages":[{"role":"user","content":"` + strings.Repeat("a", 5000) + `"}]}`
	hugeBad := `{"model":"free",` + strings.Repeat(" ", 5000)
	longInput := strings.Repeat("word ", 80)
	noKey := "Authorization:"
	badKey := "Authorization: Bearer wrong-key"

	tests := []struct {
		name   string
		path   string
		body   string
		hdr    []string
		status int
		typ    ErrorType
		code   ErrorCode
		param  *string
	}{
		// 400 invalid_json
		{name: "truncated JSON", body: `{"model":"free",`, status: 400, code: "invalid_json"},
		{name: "not an object", body: `[{"model":"free"}]`, status: 400, code: "invalid_json"},
		{name: "empty body", body: ``, status: 400, code: "invalid_json"},
		{name: "trailing garbage", body: `{"model":"free","messages":[` + userHi + `]} x`, status: 400, code: "invalid_json"},
		{name: "trailing bracket", body: `{"model":"free","messages":[` + userHi + `]}]`, status: 400, code: "invalid_json"},
		{name: "two objects", body: `{"model":"free"}{"model":"free"}`, status: 400, code: "invalid_json"},
		{name: "duplicate key", body: `{"model":"free","model":"free","messages":[` + userHi + `]}`, status: 400, code: "invalid_json"},
		{name: "invalid UTF-8", body: "{\"model\":\"free\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", status: 400, code: "invalid_json"},
		{name: "messages not an array", body: `{"model":"free","messages":{}}`, status: 400, code: "invalid_json", param: sp("messages")},
		{name: "message without role", body: `{"model":"free","messages":[{"content":"hi"}]}`, status: 400, code: "invalid_json", param: sp("messages[0]")},
		{name: "stream not boolean", body: `{"model":"free","stream":"yes","messages":[` + userHi + `]}`, status: 400, code: "invalid_json", param: sp("stream")},

		// 400 invalid_message: content a string, null, or parts with a string type
		{name: "content a number", body: `{"model":"free","messages":[{"role":"assistant","content":"x"},{"role":"user","content":"a"},{"role":"user","content":123}]}`, status: 400, code: "invalid_message", param: sp("messages[2].content")},
		{name: "content an object", body: `{"model":"free","messages":[{"role":"user","content":{"text":"hi"}}]}`, status: 400, code: "invalid_message", param: sp("messages[0].content")},
		{name: "content true", body: `{"model":"free","messages":[{"role":"user","content":true}]}`, status: 400, code: "invalid_message", param: sp("messages[0].content")},
		{name: "part without type", body: `{"model":"free","messages":[{"role":"user","content":[{"text":"hi"}]}]}`, status: 400, code: "invalid_message", param: sp("messages[0].content")},
		{name: "part type a number", body: `{"model":"free","messages":[{"role":"user","content":[{"type":1,"text":"hi"}]}]}`, status: 400, code: "invalid_message", param: sp("messages[0].content")},
		{name: "part not an object", body: `{"model":"free","messages":[{"role":"user","content":["hi"]}]}`, status: 400, code: "invalid_message", param: sp("messages[0].content")},
		// null (or no content) only on assistant turns
		{name: "user content null", body: `{"model":"free","messages":[{"role":"user","content":null}]}`, status: 400, code: "invalid_message", param: sp("messages[0].content")},
		{name: "user content missing", body: `{"model":"free","messages":[{"role":"system","content":"s"},{"role":"user"}]}`, status: 400, code: "invalid_message", param: sp("messages[1].content")},
		{name: "system content null", body: `{"model":"free","messages":[{"role":"system","content":null},` + userHi + `]}`, status: 400, code: "invalid_message", param: sp("messages[0].content")},
		{name: "tool content null", body: `{"model":"free","messages":[` + userHi + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":null}]}`, status: 400, code: "invalid_message", param: sp("messages[2].content")},

		// 400 input_schema_violation
		{name: "last user message not JSON", body: `{"model":"classify","messages":[` + userHi + `]}`, status: 400, code: "input_schema_violation", param: sp("messages")},
		{name: "last user message a JSON array", body: `{"model":"classify","messages":[{"role":"user","content":"[1]"}]}`, status: 400, code: "input_schema_violation", param: sp("messages")},
		{name: "last user message not the object", body: `{"model":"classify","messages":[` + classifyMsg + `,` + userHi + `]}`, status: 400, code: "input_schema_violation", param: sp("messages")},
		{name: "input misses required", body: `{"model":"classify","messages":[{"role":"user","content":"{\"subject\":\"x\"}"}]}`, status: 400, code: "input_schema_violation", param: sp("messages")},
		{name: "contract_input extra key", body: `{"model":"classify","contract_input":{"subject":"a","body":"b","x":1}}`, status: 400, code: "input_schema_violation", param: sp("contract_input")},
		{name: "contract_input not object", body: `{"model":"classify","contract_input":"a"}`, status: 400, code: "input_schema_violation", param: sp("contract_input")},
		{name: "no user message", body: `{"model":"classify","messages":[]}`, status: 400, code: "input_schema_violation", param: sp("messages")},
		{name: "no user message without schema", body: `{"model":"free","messages":[{"role":"assistant","content":"x"}]}`, status: 400, code: "input_schema_violation", param: sp("messages")},

		// 400 client_system_not_allowed
		{name: "system role", body: `{"model":"free","messages":[{"role":"system","content":"x"},` + userHi + `]}`, status: 400, code: "client_system_not_allowed", param: sp("messages[0]")},
		{name: "developer role", body: `{"model":"free","messages":[` + userHi + `,{"role":"developer","content":"x"}]}`, status: 400, code: "client_system_not_allowed", param: sp("messages[1]")},

		// 400 unsupported_parameter
		{name: "tools", body: `{"model":"free","tools":[],"messages":[` + userHi + `]}`, status: 400, code: "unsupported_parameter", param: sp("tools")},
		{name: "functions", body: `{"model":"free","functions":[{"name":"f"}],"messages":[` + userHi + `]}`, status: 400, code: "unsupported_parameter", param: sp("functions")},
		{name: "tool_choice", body: `{"model":"free","tool_choice":"auto","messages":[` + userHi + `]}`, status: 400, code: "unsupported_parameter", param: sp("tool_choice")},
		{name: "function_call", body: `{"model":"free","function_call":"none","messages":[` + userHi + `]}`, status: 400, code: "unsupported_parameter", param: sp("function_call")},
		{name: "n 2", body: `{"model":"free","n":2,"messages":[` + userHi + `]}`, status: 400, code: "unsupported_parameter", param: sp("n")},
		{name: "n 0", body: `{"model":"free","n":0,"messages":[` + userHi + `]}`, status: 400, code: "unsupported_parameter", param: sp("n")},
		{name: "n string", body: `{"model":"free","n":"1","messages":[` + userHi + `]}`, status: 400, code: "unsupported_parameter", param: sp("n")},

		// 400 input_too_large (attempt 1's input over max_input_tokens)
		{name: "input too large", body: `{"model":"tight","messages":[{"role":"user","content":"` + longInput + `"}]}`, status: 400, code: "input_too_large", param: sp("messages")},

		// 401
		{name: "no key", body: `{"model":"free","messages":[` + userHi + `]}`, hdr: []string{noKey}, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "wrong key", body: `{"model":"free","messages":[` + userHi + `]}`, hdr: []string{badKey}, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "key prefix", body: `{"model":"free","messages":[` + userHi + `]}`, hdr: []string{"Authorization: Bearer client-key-"}, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "empty bearer", body: `{"model":"free","messages":[` + userHi + `]}`, hdr: []string{"Authorization: Bearer"}, status: 401, typ: "authentication_error", code: "invalid_api_key"},

		// 404
		{name: "unknown route by model", body: `{"model":"nope","messages":[` + userHi + `]}`, status: 404, code: "model_not_found", param: sp("model")},
		{name: "no model", body: `{"messages":[` + userHi + `]}`, status: 404, code: "model_not_found", param: sp("model")},
		{name: "unknown route by path", path: "/r/nope/v1/chat/completions", body: `{"model":"free","messages":[` + userHi + `]}`, status: 404, code: "model_not_found", param: sp("model")},
		{name: "route names are case-sensitive", body: `{"model":"FREE","messages":[` + userHi + `]}`, status: 404, code: "model_not_found", param: sp("model")},

		// 413
		{name: "too large", body: huge, status: 413, code: "request_too_large"},

		// order: auth, size, JSON, route, parameters, system, input.
		{name: "order: bad key and bad JSON", body: `{"model":`, hdr: []string{badKey}, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "order: bad key and too large", body: huge, hdr: []string{badKey}, status: 401, typ: "authentication_error", code: "invalid_api_key"},
		{name: "order: too large and bad JSON", body: hugeBad, status: 413, code: "request_too_large"},
		{name: "order: bad JSON and unknown route", body: `{"model":"nope",`, status: 400, code: "invalid_json"},
		{name: "order: unknown route with tools", body: `{"model":"nope","tools":[{}],"messages":[{"role":"system","content":"x"}]}`, status: 404, code: "model_not_found", param: sp("model")},
		{name: "order: tools and system", body: `{"model":"free","messages":[{"role":"system","content":"x"}],"tools":[{}]}`, status: 400, code: "unsupported_parameter", param: sp("tools")},
		{name: "order: n and system", body: `{"model":"classify","messages":[{"role":"developer","content":"x"}],"n":3}`, status: 400, code: "unsupported_parameter", param: sp("n")},
		{name: "order: system and bad input", body: `{"model":"classify","messages":[{"role":"system","content":"x"},` + userHi + `]}`, status: 400, code: "client_system_not_allowed", param: sp("messages[0]")},
		{name: "order: system before input_too_large", body: `{"model":"tight","messages":[{"role":"system","content":"x"},{"role":"user","content":"` + longInput + `"}]}`, status: 400, code: "client_system_not_allowed", param: sp("messages[0]")},
		{name: "order: tools before input_too_large", body: `{"model":"tight","tools":[{}],"messages":[{"role":"user","content":"` + longInput + `"}]}`, status: 400, code: "unsupported_parameter", param: sp("tools")},
	}
	h := newHarness(t, always(validAnswer), cfg{MaxBody: 4096})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := h.up.Hits()
			r := h.post(tc.path, tc.body, tc.hdr...)
			typ := tc.typ
			if typ == "" {
				typ = "invalid_request_error"
			}
			wantError(t, r, tc.status, typ, tc.code, tc.param)
			wantContractHeaders(t, r, "", 0)
			if h.up.Hits() != before {
				t.Errorf("a rejected request reached the upstream")
			}
		})
	}
	// Every chat request is audited, rejections included, and no key is.
	evs := h.sink.Events()
	if len(evs) != len(tests) {
		t.Errorf("audit events %d, want %d", len(evs), len(tests))
	}
	for _, ev := range evs {
		if ev.Outcome != "rejected" || ev.Status < 400 || ev.Status > 413 || ev.ErrorCode == "" {
			t.Errorf("audit event %+v", ev)
		}
	}
	if strings.Contains(h.sink.Raw(), "client-key") || strings.Contains(h.sink.Raw(), "wrong-key") {
		t.Error("a client key reached the audit log")
	}
}

// The 404's message says what is wrong with the model member: a missing,
// empty or non-string model is not a route named "".
func TestUnknownRouteMessages(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	for _, tc := range []struct{ name, path, body, want string }{
		{"no model", "", `{"messages":[` + userHi + `]}`, "model must name a route (a non-empty string); GET /v1/models lists the routes"},
		{"model a number", "", `{"model":5,"messages":[` + userHi + `]}`, "model must name a route (a non-empty string); GET /v1/models lists the routes"},
		{"model empty", "", `{"model":"","messages":[` + userHi + `]}`, "model must name a route (a non-empty string); GET /v1/models lists the routes"},
		{"unknown name", "", `{"model":"nope","messages":[` + userHi + `]}`, `unknown route "nope"; GET /v1/models lists the routes`},
		{"responses, no model", "/v1/responses", `{"input":"hi"}`, "model must name a route (a non-empty string); GET /v1/models lists the routes"},
		{"unknown path", "/r/nope/v1/chat/completions", `{"messages":[` + userHi + `]}`, `unknown route "nope"; GET /v1/models lists the routes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.post(tc.path, tc.body)
			wantError(t, r, 404, "invalid_request_error", "model_not_found", sp("model"))
			if got, _ := r.errorObj()["message"].(string); got != tc.want {
				t.Errorf("message %q, want %q", got, tc.want)
			}
		})
	}
}

// A body without Content-Length over max_body_bytes is cut off at the limit.
func TestRequestTooLargeChunked(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{MaxBody: 4096})
	body := `{"model":"free","messages":[{"role":"user","content":"` + strings.Repeat("a", 10000) + `"}]}`
	r := h.do(context.Background(), "", io.MultiReader(strings.NewReader(body)), -1)
	wantError(t, r, 413, "invalid_request_error", "request_too_large", nil)
	// At the limit exactly is fine.
	pad := 4096 - len(`{"model":"free","messages":[{"role":"user","content":""}]}`)
	ok := `{"model":"free","messages":[{"role":"user","content":"` + strings.Repeat("a", pad) + `"}]}`
	if len(ok) != 4096 {
		t.Fatalf("test premise: %d bytes", len(ok))
	}
	if r := h.do(context.Background(), "", io.MultiReader(strings.NewReader(ok)), -1); r.Status != 200 {
		t.Errorf("body of exactly max_body_bytes: status %d %s", r.Status, r.Body)
	}
}

// Every response carries one X-Request-Id, GETs and unknown paths included.
func TestRequestIDEverywhere(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	ids := map[string]bool{}
	for _, tc := range []struct {
		method, path, auth string
		status             int
	}{
		{"GET", "/v1/models", clientKey, 200},
		{"GET", "/r/free/v1/models", clientKey, 200},
		{"GET", "/r/nope/v1/models", clientKey, 404},
		{"GET", "/v1/models", "", 401},
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 503},
		{"GET", "/metrics", "", 401},
		{"GET", "/metrics", clientKey, 404},
		{"GET", "/admin/x", "wrong", 401},
		{"GET", "/nowhere", "", 404},
		{"GET", "/v1/chat/completions", clientKey, 404},
		{"POST", "/v1/chat/completions", clientKey, 200},
	} {
		body := ""
		if tc.method == "POST" {
			body = `{"model":"free","messages":[` + userHi + `]}`
		}
		r := send(t, h.client, tc.method, h.front.URL+tc.path, body, tc.auth)
		if r.Status != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, r.Status, tc.status, r.Body)
		}
		id := wantRequestID(t, r)
		if ids[id] {
			t.Errorf("request id %s reused", id)
		}
		ids[id] = true
	}
}

func TestModels(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	b := send(t, h.client, "GET", h.front.URL+"/v1/models", "", clientKey).Body
	want := `"data":[{"id":"classify","object":"model"`
	if !strings.Contains(string(b), `"object":"list"`) || !strings.Contains(string(b), want) ||
		strings.Count(string(b), `"object":"model"`) != len(routeOrder) {
		t.Errorf("models: %s", b)
	}
	b = send(t, h.client, "GET", h.front.URL+"/r/raw/v1/models", "", clientKey).Body
	if strings.Count(string(b), `"object":"model"`) != 1 || !strings.Contains(string(b), `"id":"raw"`) {
		t.Errorf("route models: %s", b)
	}
}

// An assistant turn that only calls tools has no content (null or
// absent): it goes upstream as sent, beside the tool's answer.
func TestAssistantTurnWithoutContent(t *testing.T) {
	for _, asst := range []string{
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
	} {
		h := newHarness(t, always(validAnswer), cfg{})
		body := `{"model":"free","messages":[` + userHi + `,` + asst + `,{"role":"tool","tool_call_id":"c1","content":"42"},` + userHi + `]}`
		_, calls := h.postCalls(body, 1)
		if !strings.Contains(string(calls[0].Body), asst) {
			t.Errorf("upstream body lacks the assistant turn as sent:\n%s", calls[0].Body)
		}
	}
}

// TestErrorEnvelopeNotHTMLEscaped: the envelope is JSON for clients, never
// HTML, so a message reads as written: the 401's "Bearer <key>" came out
// as "Bearer \u003ckey\u003e" in every curl, and a violation message's "&"
// or ">" the same. The body still decodes to the same message.
func TestErrorEnvelopeNotHTMLEscaped(t *testing.T) {
	e := &APIError{Status: http.StatusUnauthorized, Type: typeAuth, Code: CodeInvalidAPIKey,
		Message: "missing or invalid API key (send Authorization: Bearer <key>) & retry > 0"}
	rec := httptest.NewRecorder()
	writeError(rec, e)
	body := rec.Body.String()
	if !strings.Contains(body, `"message":"missing or invalid API key (send Authorization: Bearer <key>) & retry > 0"`) || strings.Contains(body, `\u003c`) {
		t.Errorf("body %s, want the message as written", body)
	}
	if !strings.HasSuffix(body, "}\n") || strings.HasSuffix(body, "}\n\n") {
		t.Errorf("body %q, want one JSON object and one newline", body)
	}
	var eb errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Message != e.Message {
		t.Errorf("decoded %+v, %v", eb.Error, err)
	}
}

// The envelope gate answers only what errorTable holds: a code outside
// it, or one of its codes with another status or type, is a bug, answered
// 500 internal_error (a test of the new code's path sees it), its cause
// kept for the log. Before, writeError sent whatever it was given, so a
// new code reached clients whether or not docs/clients.md had it.
func TestUndeclaredErrorAnswers500(t *testing.T) {
	for _, e := range []*APIError{
		{Status: http.StatusTeapot, Type: typeInvalidRequest, Code: "made_up_code", Message: "m"},
		{Status: http.StatusNotFound, Type: typeServer, Code: CodeModelNotFound, Message: "m"},
		{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: CodeModelNotFound, Message: "m"},
	} {
		rec := httptest.NewRecorder()
		rec.Header().Set("X-Request-Id", newRequestID()) // as every handler sets it first
		writeError(rec, e)
		r := &result{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
		_ = json.Unmarshal(r.Body, &r.JSON)
		wantError(t, r, http.StatusInternalServerError, typeServer, CodeInternal, nil)
		if a := accepted(e); !errors.Is(a.Internal, errUndeclared) || !strings.Contains(a.Internal.Error(), string(e.Code)) {
			t.Errorf("%s: the refusal's cause %v does not name it", e.Code, a.Internal)
		}
	}
	for code, k := range errorTable {
		e := &APIError{Status: k.Status, Type: k.Type, Code: code, Message: "m"}
		if accepted(e) != e {
			t.Errorf("%s (%d %s) from the table is refused", code, k.Status, k.Type)
		}
	}
}
