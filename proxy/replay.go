package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/go-json-experiment/json/jsontext"
)

// This file is what `contractd replay` borrows from serving, so a replayed
// verdict is the verdict serving would give: the same judge, the same
// request preparation and prompt rendering, the same attempt loop.

// Judge is serving's verdict on one stored output: the contract's check
// plus the upstream violations its finish reason implies (truncation,
// refusal). refused says the upstream refused (a refusal text, which the
// audit does not keep, or a stored model_refusal violation).
func Judge(k *contracts.Contract, output, finishReason string, refused bool, subj *contracts.Subject) contracts.Result {
	c := &Completion{Output: output, Finish: finishReason}
	if refused {
		c.Refusal = "refused"
	}
	return judge(k, c, subj)
}

// StoredRequest is a chat request body that carries a stored input (an
// audit event's or a review item's `input`) the way serving read it: the
// input text (a string input, else the JSON text) as the last user
// message, so both .Input and the evidence source come back; or, for a
// non-string input on a prompt without input schema (it came from
// contract_input with no user message), contract_input.
func StoredRequest(route *config.Route, input json.RawMessage) []byte {
	input = bytes.TrimSpace(input)
	var text string
	isString := len(input) > 0 && input[0] == '"' && json.Unmarshal(input, &text) == nil
	if !isString && route.Prompt != nil && route.Prompt.InputSchema == nil {
		var b bytes.Buffer
		b.WriteString(`{"model":`)
		writeString(&b, route.Name)
		b.WriteString(`,"messages":[],"contract_input":`)
		if len(input) == 0 {
			b.WriteString("null")
		} else {
			b.Write(input)
		}
		b.WriteByte('}')
		return b.Bytes()
	}
	if !isString {
		text = string(input)
	}
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	writeString(&b, route.Name)
	b.WriteString(`,"messages":[{"role":"user","content":`)
	writeString(&b, text)
	b.WriteString(`}]}`)
	return b.Bytes()
}

// StoredSubject is RequestSubject(route, StoredRequest(route, input))
// without writing and parsing the request body: the stored input goes
// into serving's request path (prepare, input checks, attempt 1's prompt)
// as the client message it came from. Replay calls it once per stored
// record, so it is worth the shortcut.
func StoredSubject(route *config.Route, input json.RawMessage) (contracts.Subject, *APIError) {
	input = bytes.TrimSpace(input)
	var text string
	isString := false
	if len(input) > 0 && input[0] == '"' {
		if b, err := jsontext.AppendUnquote(nil, input); err == nil {
			text, isString = string(b), true
		}
	}
	var obj object
	var msgs []clientMessage
	switch {
	case !isString && route.Prompt != nil && route.Prompt.InputSchema == nil:
		if len(input) == 0 {
			input = json.RawMessage("null")
		}
		obj = object{{Name: "contract_input", Value: jsontext.Value(input)}}
		msgs = []clientMessage{}
	default:
		if !isString {
			text = string(input)
		}
		var raw bytes.Buffer
		raw.WriteString(`{"role":"user","content":`)
		writeString(&raw, text)
		raw.WriteByte('}')
		msgs = []clientMessage{{Role: "user", Content: text, IsString: true, Raw: raw.Bytes()}}
	}
	p, aerr := prepare(route, obj, msgs)
	if aerr != nil {
		return contracts.Subject{}, aerr
	}
	subj := p.Subject
	if sys, _, static := route.Prompt.StaticSystem(); static && !route.Prompt.HasUser() {
		// Nothing for the input to fill: Build cannot fail and sends this
		// system prompt, so skip writing the upstream body.
		subj.SystemPrompt = sys
		return subj, nil
	}
	ab, aerr := p.Build(route.Plan[0])
	if aerr != nil {
		return contracts.Subject{}, aerr
	}
	subj.SystemPrompt = ab.System
	return subj, nil
}

// RequestSubject prepares a client request body on route as serving would
// (input checks against the current input schema included) and renders
// attempt 1's prompt, returning what the contract's policies judge with:
// the input, the evidence source and the system prompt for prompt_leak.
// The error is the 400 serving would answer the request with.
func RequestSubject(route *config.Route, body []byte) (contracts.Subject, *APIError) {
	p, aerr := PrepareAny(route, body)
	if aerr != nil {
		return contracts.Subject{}, aerr
	}
	subj := p.Subject
	ab, aerr := p.Build(route.Plan[0])
	if aerr != nil {
		return contracts.Subject{}, aerr
	}
	subj.SystemPrompt = ab.System
	return subj, nil
}

// Replayed is what one stored request got when it went through its route's
// current attempt plan again.
type Replayed struct {
	Valid    bool
	Output   json.RawMessage // the accepted JSON when Valid
	Attempts []ReplayedAttempt
	// Err is the error serving would have answered with instead of a
	// verdict (400 on the input, 502/504 upstream, 499 when ctx ended).
	Err *APIError
}

// ReplayedAttempt is one attempt of a replayed request.
type ReplayedAttempt struct {
	ReviewAttempt
	Output string `json:"output"`
}

// Replay sends body (a stored client request, chat or Responses) through
// the route's current attempt plan against its upstream, like a review
// rerun: nothing is stored, audited or deduplicated. It errors only for
// a route that is not a contract route in the current config.
func (s *Server) Replay(ctx context.Context, routeName string, body []byte) (*Replayed, *APIError) {
	route, aerr := s.contractRoute(routeName)
	if aerr != nil {
		return nil, aerr
	}
	p, aerr := PrepareAny(route, body)
	if aerr != nil {
		return &Replayed{Err: aerr}, nil
	}
	st := s.state.Load()
	ctx, cancel := context.WithTimeout(ctx, st.rt.Server.RequestTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", http.NoBody)
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Type: typeServer, Code: CodeInternal, Message: err.Error()}
	}
	id := newRequestID()
	x := &exchange{s: s, st: st, start: time.Now(), ev: &audit.Event{Time: time.Now().UTC(), RequestID: id, Route: route.Name},
		log: s.Logger.With("replay_id", id)}
	v, aerr := s.attempts(ctx, r, x, p)
	out := &Replayed{}
	if v != nil {
		for i, a := range v.attempts {
			ra := ReplayedAttempt{ReviewAttempt: a}
			if i < len(v.outputs) {
				ra.Output = v.outputs[i]
			}
			out.Attempts = append(out.Attempts, ra)
		}
	}
	switch {
	case aerr == nil:
		out.Valid, out.Output = true, json.RawMessage(v.result.JSON)
	case aerr.Review == nil:
		out.Err = aerr
	}
	return out, nil
}
