package proxy

// The Responses API edge: the same prepared request and attempt plan as
// chat (the upstream bodies are equal), its own response object and event
// stream, the same errors and 422 review, the Responses-only 400s,
// passthrough relay, audit "api", and a client that leaves mid-verdict.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/internal/testkit"
)

const respPath = "/v1/responses"

// normIDs replaces request-derived ids so bodies can be golden.
var idRE = regexp.MustCompile(`req_[0-9a-f]{24}`)

func normIDs(b []byte) []byte { return idRE.ReplaceAll(b, []byte("req_ID")) }

func TestResponsesSameUpstreamBodyAsChat(t *testing.T) {
	h := newHarness(t, byTemperature(invalidAnswer, validAnswer), cfg{})
	chat := h.post("", `{"model":"free","top_p":0.5,"user":"u1","metadata":{"k":"v"},"messages":[{"role":"user","content":"what is it?"},{"role":"assistant","content":"hm"},{"role":"user","content":[{"type":"text","text":"and now?"}]}]}`)
	resp := h.post(respPath, `{"model":"free","top_p":0.5,"user":"u1","metadata":{"k":"v"},"store":true,"max_output_tokens":9,"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}},"input":[{"role":"user","content":"what is it?"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hm"}]},{"role":"user","content":[{"type":"input_text","text":"and now?"}]}]}`)
	if chat.Status != 200 || resp.Status != 200 {
		t.Fatalf("chat %d %s / responses %d %s", chat.Status, chat.Body, resp.Status, resp.Body)
	}
	calls := h.up.Calls()
	if len(calls) != 4 {
		t.Fatalf("%d upstream calls, want 2+2", len(calls))
	}
	for i := 0; i < 2; i++ {
		c, r := calls[i].JSON, calls[i+2].JSON
		// The chat request's "assistant" message had string content; the
		// Responses item had an output_text part: the one difference.
		if ms := r["messages"].([]any); len(ms) > 2 {
			ms[2].(map[string]any)["content"] = "hm"
		}
		if !reflect.DeepEqual(c, r) {
			t.Errorf("attempt %d upstream bodies differ:\nchat      %s\nresponses %s", i+1, calls[i].Body, calls[i+2].Body)
		}
		if calls[i+2].Path != "/v1/chat/completions" {
			t.Errorf("responses attempt went to %s", calls[i+2].Path)
		}
	}
	wantContractHeaders(t, resp, "free", 2)
	id := wantRequestID(t, resp)
	if resp.JSON["id"] != "resp_"+id || resp.JSON["object"] != "response" || resp.JSON["status"] != "completed" {
		t.Errorf("response id/object/status: %s", resp.Body)
	}
	// usage summed over both attempts: (10,5) + (8,4)
	u := resp.JSON["usage"].(map[string]any)
	if u["input_tokens"] != 18.0 || u["output_tokens"] != 9.0 || u["total_tokens"] != 27.0 {
		t.Errorf("usage %v", u)
	}
	if !reflect.DeepEqual(resp.JSON["contract"], chat.JSON["contract"]) {
		t.Errorf("contract member differs: %v vs %v", resp.JSON["contract"], chat.JSON["contract"])
	}
	checkGolden(t, "responses_success.json", normIDs(resp.Body))
	ev := h.sink.waitEvent(t, id)
	if ev.API != "responses" || ev.Outcome != audit.OutcomeValid {
		t.Errorf("audit api %q outcome %q", ev.API, ev.Outcome)
	}
	if ev := h.sink.waitEvent(t, wantRequestID(t, chat)); ev.API != "chat" {
		t.Errorf("chat audit api %q", ev.API)
	}
}

func TestResponsesStream(t *testing.T) {
	h := newHarness(t, byTemperature(invalidAnswer, validAnswer), cfg{})
	r := h.post(respPath, `{"model":"free","stream":true,"stream_options":{"include_obfuscation":false},"input":"what is it?"}`)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %q: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	wantContractHeaders(t, r, "free", 2)
	checkGolden(t, "responses_stream.txt", normIDs(r.Body))
	// Every event: an event: line naming its data's type, sequence numbers 0,1,2…
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	sc := bufio.NewScanner(strings.NewReader(string(r.Body)))
	var got []string
	text := ""
	for sc.Scan() {
		name, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			continue
		}
		sc.Scan()
		var d map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &d); err != nil {
			t.Fatalf("data of %s: %v", name, err)
		}
		if d["type"] != name || d["sequence_number"] != float64(len(got)) {
			t.Errorf("event %d %s: type %v sequence_number %v", len(got), name, d["type"], d["sequence_number"])
		}
		if name == "response.output_text.delta" {
			text += d["delta"].(string)
		}
		got = append(got, name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %v\nwant %v", got, want)
	}
	if text != validAnswer {
		t.Errorf("streamed text %q", text)
	}
}

// A 422 is the chat 422: same status, headers, envelope and review (ids aside).
func TestResponsesNeedsReviewSameAsChat(t *testing.T) {
	h := newHarness(t, always(invalidAnswer), cfg{})
	chat := h.post("", `{"model":"free","messages":[{"role":"user","content":"q"}]}`)
	for _, body := range []string{`{"model":"free","input":"q"}`, `{"model":"free","input":"q","stream":true}`} {
		resp := h.post(respPath, body)
		wantError(t, resp, 422, "needs_review", CodeContractViolation, nil)
		wantContractHeaders(t, resp, "free", 2)
		id := wantRequestID(t, resp)
		if review := resp.errorObj()["review"].(map[string]any); review["id"] != id {
			t.Errorf("review id %v, want %s", review["id"], id)
		}
		if got, want := normIDs(resp.Body), normIDs(chat.Body); string(got) != string(want) {
			t.Errorf("422 bodies differ:\nresponses %s\nchat      %s", got, want)
		}
		for _, k := range []string{"Content-Type", "X-Contract-Attempts", "X-Should-Retry"} {
			if resp.Header.Get(k) != chat.Header.Get(k) {
				t.Errorf("header %s: %q vs chat %q", k, resp.Header.Get(k), chat.Header.Get(k))
			}
		}
		if ev := h.sink.waitEvent(t, id); ev.API != "responses" || ev.Outcome != audit.OutcomeNeedsReview {
			t.Errorf("audit api %q outcome %q", ev.API, ev.Outcome)
		}
	}
	if strings.Contains(string(chat.Body), rejectedMarker) {
		t.Error("the rejected output reached the client")
	}
}

func TestResponsesBadRequests(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if strings.Contains(string(c.Body), "Classify") {
			always(validClassify)(w, r, c)
			return
		}
		always(validAnswer)(w, r, c)
	}, cfg{MaxBody: 1024})
	tests := []struct {
		name, path, body string
		status           int
		code             ErrorCode
		param            string
	}{
		{"tools", "", `{"model":"free","input":"q","tools":[{"type":"function","name":"f"}]}`, 400, CodeUnsupportedParameter, "tools"},
		{"tool_choice", "", `{"model":"free","input":"q","tool_choice":"auto"}`, 400, CodeUnsupportedParameter, "tool_choice"},
		{"previous_response_id", "", `{"model":"free","input":"q","previous_response_id":"resp_1"}`, 400, CodeUnsupportedParameter, "previous_response_id"},
		{"conversation", "", `{"model":"free","input":"q","conversation":"conv_1"}`, 400, CodeUnsupportedParameter, "conversation"},
		{"background", "", `{"model":"free","input":"q","background":true}`, 400, CodeUnsupportedParameter, "background"},
		{"unknown field", "", `{"model":"free","input":"q","reasoning":{"effort":"low"}}`, 400, CodeUnsupportedParameter, "reasoning"},
		{"input number", "", `{"model":"free","input":42}`, 400, CodeInvalidJSON, "input"},
		{"input object", "", `{"model":"free","input":{"role":"user","content":"q"}}`, 400, CodeInvalidJSON, "input"},
		{"input missing", "", `{"model":"free"}`, 400, CodeInvalidJSON, "input"},
		{"input empty list", "", `{"model":"free","input":[]}`, 400, CodeInputSchemaViolation, "input"},
		{"item not an object", "", `{"model":"free","input":["q"]}`, 400, CodeInvalidJSON, "input[0]"},
		{"item without role", "", `{"model":"free","input":[{"content":"q"}]}`, 400, CodeInvalidJSON, "input[0].role"},
		{"item bad role", "", `{"model":"free","input":[{"role":"tool","content":"q"}]}`, 400, CodeInvalidJSON, "input[0].role"},
		{"function_call item", "", `{"model":"free","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`, 400, CodeUnsupportedParameter, "input[0].type"},
		{"image part", "", `{"model":"free","input":[{"role":"user","content":[{"type":"input_text","text":"q"},{"type":"input_image","image_url":"x"}]}]}`, 400, CodeUnsupportedParameter, "input[0].content[1].type"},
		{"unknown part", "", `{"model":"free","input":[{"role":"user","content":[{"type":"bogus"}]}]}`, 400, CodeUnsupportedParameter, "input[0].content[0].type"},
		// Content that is not a string or a list of parts each
		// with a string type is 400 invalid_message naming the message, as
		// on chat completions.
		{"part text not a string", "", `{"model":"free","input":[{"role":"user","content":[{"type":"input_text","text":1}]}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"part text missing", "", `{"model":"free","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"content number", "", `{"model":"free","input":[{"role":"user","content":1}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"content object", "", `{"model":"free","input":[{"role":"user","content":{"type":"input_text","text":"q"}}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"content true", "", `{"model":"free","input":[{"role":"user","content":"q"},{"role":"user","content":true}]}`, 400, CodeInvalidMessage, "input[1].content"},
		{"part not an object", "", `{"model":"free","input":[{"role":"user","content":["q"]}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"part without type", "", `{"model":"free","input":[{"role":"user","content":[{"text":"q"}]}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"part type a number", "", `{"model":"free","input":[{"type":"message","role":"user","content":[{"type":1,"text":"q"}]}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"content missing", "", `{"model":"free","input":[{"role":"user"}]}`, 400, CodeInvalidJSON, "input[0].content"},
		// null is not content on this edge (a string or input_text parts):
		// a client's bad value, named like the others, not a JSON error.
		{"content null", "", `{"model":"free","input":[{"role":"user","content":null}]}`, 400, CodeInvalidMessage, "input[0].content"},
		{"assistant content null", "", `{"model":"free","input":[{"role":"user","content":"q"},{"role":"assistant","content":null}]}`, 400, CodeInvalidMessage, "input[1].content"},
		{"instructions on reject", "", `{"model":"free","input":"q","instructions":"be terse"}`, 400, CodeClientSystem, "instructions"},
		{"system item on reject", "", `{"model":"free","input":[{"role":"developer","content":"x"},{"role":"user","content":"q"}]}`, 400, CodeClientSystem, "input"},
		{"instructions not a string", "", `{"model":"free-drop","input":"q","instructions":[1]}`, 400, CodeInvalidJSON, "instructions"},
		{"text not an object", "", `{"model":"free","input":"q","text":"json"}`, 400, CodeInvalidJSON, "text"},
		{"stream not a boolean", "", `{"model":"free","input":"q","stream":"yes"}`, 400, CodeInvalidJSON, "stream"},
		{"input schema", "", `{"model":"classify","input":"not an object"}`, 400, CodeInputSchemaViolation, "input"},
		{"invalid json", "", `{"model":"free","input":`, 400, CodeInvalidJSON, ""},
		{"unknown route", "", `{"model":"nope","input":"q"}`, 404, CodeModelNotFound, "model"},
		{"too large", "", `{"model":"free","input":"` + strings.Repeat("x", 2000) + `"}`, 413, CodeRequestTooLarge, ""},
		{"route path, tools", "/r/free/v1/responses", `{"input":"q","tools":[]}`, 400, CodeUnsupportedParameter, "tools"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = respPath
			}
			r := h.post(path, tc.body)
			var param *string
			if tc.param != "" {
				param = &tc.param
			}
			wantError(t, r, tc.status, "invalid_request_error", tc.code, param)
			wantContractHeaders(t, r, "", 0)
			if ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id")); ev.API != "responses" || ev.Outcome != audit.OutcomeRejected {
				t.Errorf("audit api %q outcome %q", ev.API, ev.Outcome)
			}
		})
	}
	if n := h.up.Hits(); n != 0 {
		t.Errorf("%d upstream calls for bad requests", n)
	}
	// Accepted: instructions on a drop route (dropped), store, contract_input with an empty list.
	for _, body := range []string{
		`{"model":"free-drop","input":"q","instructions":"be terse","store":false}`,
		`{"model":"classify","input":[],"contract_input":{"subject":"Broken window","body":"the window broke"}}`,
		`{"input":"q"}`,
	} {
		path := respPath
		if !strings.Contains(body, "model") {
			path = "/r/free/v1/responses"
		}
		if r := h.post(path, body); r.Status != 200 {
			t.Errorf("%s: %d %s", body, r.Status, r.Body)
		}
	}
	for _, c := range h.up.Calls() {
		if strings.Contains(string(c.Body), "be terse") || c.JSON["store"] != nil || c.JSON["input"] != nil || c.JSON["instructions"] != nil {
			t.Errorf("Responses-only member reached the upstream: %s", c.Body)
		}
	}
}

// Passthrough: forwarded to the upstream's /responses with only model and
// the key changed; a stream is relayed event by event.
func TestResponsesPassthrough(t *testing.T) {
	up := testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if r.URL.Path != "/v1/responses" {
			http.Error(w, "wrong path", 404)
			return
		}
		if c.JSON["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			for i := 0; i < 2; i++ {
				fmt.Fprintf(w, "event: e%d\ndata: {\"sequence_number\":%d}\n\n", i, i)
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
			fmt.Fprint(w, "event: response.completed\ndata: {\"sequence_number\":2}\n\n")
			return
		}
		reply(w, 200, []byte(`{"id":"resp_up","object":"response","output":[]}`))
	})
	h := newHarnessOn(t, up, cfg{})
	body := `{"model":"raw-fast","input":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search"}],"previous_response_id":"resp_0","x":1.50}`
	r := h.post(respPath, body)
	if r.Status != 200 || r.JSON["id"] != "resp_up" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	c := up.Calls()[0]
	if want := strings.Replace(body, `"raw-fast"`, `"raw-upstream-model"`, 1); string(c.Body) != want {
		t.Errorf("forwarded %s\nwant      %s", c.Body, want)
	}
	if got := c.Header.Get("Authorization"); got != "Bearer "+upstreamKey+"up" {
		t.Errorf("upstream Authorization %q", got)
	}
	if ev := h.sink.waitEvent(t, r.Header.Get("X-Request-Id")); ev.API != "responses" || ev.Outcome != audit.OutcomePassthrough {
		t.Errorf("audit api %q outcome %q", ev.API, ev.Outcome)
	}
	r = h.post("/r/raw-fast/v1/responses", `{"stream":true,"input":"hi"}`)
	if r.Status != 200 || string(r.Body) != "event: e0\ndata: {\"sequence_number\":0}\n\nevent: e1\ndata: {\"sequence_number\":1}\n\nevent: response.completed\ndata: {\"sequence_number\":2}\n\n" {
		t.Errorf("relayed stream %d %q", r.Status, r.Body)
	}
}

// A streaming client that leaves while contractd is still deciding: the
// attempt plan is cancelled (the upstream call sees its context end), the
// audit line says so, and no goroutine is left behind.
func TestResponsesClientLeavesMidVerdict(t *testing.T) {
	check := noLeaks(t)
	var up *fakeUpstream
	up = newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request, c *upCall) { up.Hang(r) })
	h := newHarnessOn(t, up, cfg{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := startHungAt(t, h, ctx, respPath, `{"model":"slow","stream":true,"input":"q"}`)
	deadline := time.Now().Add(2 * time.Second)
	for up.Hits() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("the client got a reply")
	}
	up.WaitCanceled(t, 1, 2*time.Second)
	ev := h.sink.waitEvent(t, "")
	if ev.API != "responses" || ev.Status != 499 || ev.ErrorCode != "client_closed_request" || ev.Outcome != audit.OutcomeRejected {
		t.Errorf("audit %+v", ev)
	}
	if up.Hits() != 1 {
		t.Errorf("%d upstream calls: the plan went on after the client left", up.Hits())
	}
	h.Close()
	check()
}

func TestRenderResponses(t *testing.T) {
	rt := loadRuntime(t, "http://127.0.0.1:1/v1", cfg{})
	chat, err := Render(rt.Routes["free-drop"], []byte(`{"model":"free-drop","messages":[{"role":"user","content":"what?"}]}`), 3)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := RenderResponses(rt.Routes["free-drop"], []byte(`{"model":"free-drop","instructions":"x","input":"what?"}`), 3)
	if err != nil {
		t.Fatal(err)
	}
	if string(chat) != string(resp) {
		t.Errorf("render differs:\nchat      %s\nresponses %s", chat, resp)
	}
	checkGolden(t, "responses_render_free-drop_3.json", resp)
	if _, err := RenderResponses(rt.Routes["free"], []byte(`{"model":"free","input":"q","tools":[]}`), 1); err == nil {
		t.Error("tools rendered")
	}
	raw, err := RenderResponses(rt.Routes["raw"], []byte(`{"model":"raw","input":"q"}`), 1)
	if err != nil || string(raw) != `{"model":"raw-upstream-model","input":"q"}` {
		t.Errorf("passthrough render %s %v", raw, err)
	}
}

// A review item keeps the client's body as sent; approve and rerun prepare
// it again, so a Responses body must prepare as its chat twin does.
func TestPrepareAnyResponsesBody(t *testing.T) {
	rt := loadRuntime(t, "http://127.0.0.1:1/v1", cfg{})
	for _, tc := range []struct{ route, chat, resp string }{
		{"classify", `{"messages":[{"role":"user","content":"{\"subject\":\"s\",\"body\":\"b\"}"}]}`, `{"input":"{\"subject\":\"s\",\"body\":\"b\"}"}`},
		{"free-drop", `{"messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"q"}]}]}`, `{"instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"q"}]}]}`},
	} {
		route := rt.Routes[tc.route]
		want, aerr := PrepareAny(route, []byte(tc.chat))
		if aerr != nil {
			t.Fatal(aerr)
		}
		got, aerr := PrepareAny(route, []byte(tc.resp))
		if aerr != nil {
			t.Fatalf("%s: %v", tc.route, aerr)
		}
		if !reflect.DeepEqual(got.Subject, want.Subject) || string(got.inputJSON()) != string(want.inputJSON()) {
			t.Errorf("%s: subject %+v / %s, want %+v / %s", tc.route, got.Subject, got.inputJSON(), want.Subject, want.inputJSON())
		}
		a, _ := got.Build(route.Plan[0])
		b, _ := want.Build(route.Plan[0])
		var am, bm map[string]any
		_ = json.Unmarshal(a.Body, &am)
		_ = json.Unmarshal(b.Body, &bm)
		if !reflect.DeepEqual(am, bm) {
			t.Errorf("%s: upstream bodies differ:\n%s\n%s", tc.route, a.Body, b.Body)
		}
	}
}

// The response object echoes the request as used: metadata and top_p as
// the client sent them (forwarded upstream byte-for-byte), temperature the
// accepted attempt's (the route's, not the client's), instructions null
// (dropped by the route); null where the client sent none. Plain and in
// response.created, response.in_progress and response.completed.
func TestResponsesEchoesRequest(t *testing.T) {
	// free-drop's plan: 1, 0.2, 0; attempt 2 (0.2) is accepted
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request, c *upCall) {
		if c.Temperature() >= 0.5 {
			reply(w, 200, completion(invalidAnswer, "stop", 10, 5))
			return
		}
		reply(w, 200, completion(validAnswer, "stop", 8, 4))
	}, cfg{})
	const meta = `{ "team" : "a<b>&c", "k":"\u00e9" }`
	r := h.post(respPath, `{"model":"free-drop","temperature":1.7,"top_p":0.25e0,"metadata":`+meta+`,"instructions":"be brief","input":"what is it?"}`)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	calls := h.up.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d upstream calls, want 2", len(calls))
	}
	used := calls[len(calls)-1].JSON["temperature"]
	if used != 0.2 {
		t.Fatalf("the accepted attempt ran at %v, want the route's 0.2", used)
	}
	// plain: metadata's and top_p's bytes as sent
	for _, want := range []string{`"metadata":` + meta + `,`, `"top_p":0.25e0,`, `"instructions":null,`} {
		if !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("body lacks %s: %s", want, r.Body)
		}
	}
	if r.JSON["temperature"] != used {
		t.Errorf("temperature %v, the accepted attempt's was %v", r.JSON["temperature"], used)
	}
	wantMeta := map[string]any{"team": "a<b>&c", "k": "é"}
	if !reflect.DeepEqual(r.JSON["metadata"], wantMeta) {
		t.Errorf("metadata %v", r.JSON["metadata"])
	}

	s := h.post(respPath, `{"model":"free-drop","stream":true,"top_p":0.25e0,"metadata":`+meta+`,"input":"what is it?"}`)
	if s.Status != 200 {
		t.Fatalf("stream status %d: %s", s.Status, s.Body)
	}
	seen := 0
	for _, line := range strings.Split(string(s.Body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var d struct {
			Type     string                     `json:"type"`
			Response map[string]json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatalf("data %s: %v", data, err)
		}
		if d.Response == nil {
			continue
		}
		seen++
		// an SSE data line is one line: metadata comes compacted
		if m := string(d.Response["metadata"]); m != `{"team":"a<b>&c","k":"\u00e9"}` {
			t.Errorf("%s metadata %s", d.Type, m)
		}
		if tp := string(d.Response["top_p"]); tp != "0.25e0" {
			t.Errorf("%s top_p %s", d.Type, tp)
		}
		var temp any
		if err := json.Unmarshal(d.Response["temperature"], &temp); err != nil || temp != used {
			t.Errorf("%s temperature %s, want %v", d.Type, d.Response["temperature"], used)
		}
		if in := string(d.Response["instructions"]); in != "null" {
			t.Errorf("%s instructions %s", d.Type, in)
		}
	}
	if seen != 3 {
		t.Errorf("%d events carried the response, want 3 (created, in_progress, completed)", seen)
	}

	if len(h.up.Calls()) != 4 {
		t.Fatalf("%d upstream calls, want 2+2", len(h.up.Calls()))
	}
	n := h.post(respPath, `{"model":"free-drop","input":"what is it?"}`)
	for _, name := range []string{"metadata", "top_p", "instructions"} {
		if v, ok := n.JSON[name]; !ok || v != nil {
			t.Errorf("none sent: %s = %v (present %v)", name, v, ok)
		}
	}
	if n.JSON["temperature"] != used {
		t.Errorf("none sent: temperature %v, want the accepted attempt's %v", n.JSON["temperature"], used)
	}
}
