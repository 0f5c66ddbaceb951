package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/go-json-experiment/json/jsontext"
)

// An edge is one client-facing API over the single contract pipeline: an
// input adapter that turns its request into the chat request the pipeline
// prepares, and an output writer for the accepted verdict. Errors, reviews
// and the attempt plan are shared, so a 422 is the same on every edge.
type edge struct {
	api          string // the audit event's "api"
	upstreamPath string // where passthrough routes forward
	// adapt maps the client's body onto a chat request; nil: already one.
	// It also returns the messages it read (nil: the pipeline reads them).
	adapt func(route *config.Route, obj object) (object, []clientMessage, *APIError)
	write func(w http.ResponseWriter, v *verdict, route *config.Route, id string, p *Prepared)
}

var (
	chatEdge = &edge{api: "chat", upstreamPath: "/chat/completions", write: writeChat}
	// responsesEdge serves the Responses API with the chat attempt plan:
	// the upstream is always called on its chat completions endpoint.
	responsesEdge = &edge{api: "responses", upstreamPath: "/responses", adapt: responsesToChat, write: writeResponse}
)

func writeChat(w http.ResponseWriter, v *verdict, route *config.Route, _ string, p *Prepared) {
	if p.Stream {
		writeStream(w, v, route, route.Contract, p.IncludeUsage)
		return
	}
	writeBody(w, http.StatusOK, func(b []byte) []byte { return appendChatSuccess(b, v, route, route.Contract) })
}

// Responses request fields a contract route refuses: each needs state or
// tools contractd does not keep or run.
var responsesUnsupported = []string{"tools", "tool_choice", "previous_response_id", "conversation", "background", "prompt"}

// responsesField says what the chat request gets of a Responses field.
type fieldRule uint8

const (
	fieldKeep   fieldRule = iota + 1 // same name and meaning in chat: forwarded byte-for-byte
	fieldDrop                        // accepted, decided by the route or meaningless upstream
	fieldMapped                      // rewritten (input, instructions, text)
)

var responsesFields = map[string]fieldRule{
	"model": fieldKeep, "temperature": fieldKeep, "seed": fieldKeep, "stream": fieldKeep,
	"stream_options": fieldKeep, "top_p": fieldKeep, "user": fieldKeep, "metadata": fieldKeep,
	"contract_input": fieldKeep, "service_tier": fieldKeep, "prompt_cache_key": fieldKeep,
	"safety_identifier": fieldKeep, "top_logprobs": fieldKeep,
	// store: contractd keeps nothing for later turns and must not ask the
	// upstream to either; max_output_tokens: the route decides.
	"store": fieldDrop, "max_output_tokens": fieldDrop, "include": fieldDrop,
	"truncation": fieldDrop, "parallel_tool_calls": fieldDrop, "max_tool_calls": fieldDrop,
	"input": fieldMapped, "instructions": fieldMapped, "text": fieldMapped,
}

// responsesToChat is the Responses edge's input adapter: it checks what
// only this API has (its refused fields, the input's shape, instructions)
// and builds the chat request object the shared pipeline prepares. It
// builds the member list directly; nothing is parsed twice.
func responsesToChat(route *config.Route, obj object) (object, []clientMessage, *APIError) {
	for _, name := range responsesUnsupported {
		if v, ok := obj.get(name); ok && v.Kind() != 'n' {
			return nil, nil, badRequest(CodeUnsupportedParameter, name, "%s is not supported on contract routes", name)
		}
	}
	out := make(object, 0, len(obj)+1)
	var in, instructions jsontext.Value
	hasContractInput := false
	for _, m := range obj {
		switch responsesFields[m.Name] {
		case fieldKeep:
			out = append(out, m)
			if m.Name == "contract_input" && m.Value.Kind() != 'n' {
				hasContractInput = true
			}
		case fieldDrop:
		case fieldMapped:
			switch m.Name {
			case "input":
				in = m.Value
			case "instructions":
				instructions = m.Value
			case "text":
				rf, aerr := textFormat(m.Value)
				if aerr != nil {
					return nil, nil, aerr
				}
				if rf != nil {
					out = append(out, member{Name: "response_format", Value: rf})
				}
			}
		default:
			if m.Value.Kind() == 'n' {
				continue
			}
			// the name is client-chosen: bounded in param and message
			return nil, nil, badRequest(CodeUnsupportedParameter, truncate(m.Name, 64), "%s is not supported on contract routes", quoteForMessage(m.Name))
		}
	}
	if instructions != nil && instructions.Kind() != 'n' {
		if instructions.Kind() != '"' {
			return nil, nil, badRequest(CodeInvalidJSON, "instructions", "instructions must be a string")
		}
		if route.ClientSystem != config.ClientSystemDrop {
			return nil, nil, badRequest(CodeClientSystem, "instructions",
				"route %q does not accept instructions; its prompt is registered in contractd (%s)", route.Name, clientSystemHint)
		}
		// dropped, as the route drops the client's other system messages
	}
	if in == nil || in.Kind() == 'n' {
		if !hasContractInput {
			return nil, nil, badRequest(CodeInvalidJSON, "input", "input is required (a string, or a list of message items)")
		}
		in = jsontext.Value("[]")
	}
	ir, aerr := readResponsesInput(in, hasContractInput)
	if aerr != nil {
		return nil, nil, aerr
	}
	out = append(out, member{Name: "messages", Value: ir.buf.Bytes()})
	return out, ir.msgs, nil
}

// inputReader turns input (a string, or a list of message items) into chat
// messages: their JSON for the request object and the clientMessages the
// pipeline reads, so nothing is parsed twice. It walks the tokens once with
// one decoder (no reflection): this edge must cost about what chat costs.
type inputReader struct {
	buf  bytes.Buffer // the messages array
	msgs []clientMessage
	ends []int // end offset of each message in buf
}

func (ir *inputReader) finish() {
	b := ir.buf.Bytes()
	start := 1 // after '['
	for i, end := range ir.ends {
		ir.msgs[i].Raw = b[start:end]
		start = end + 1 // the comma
	}
}

func (ir *inputReader) add(role string, content []byte, text string, isString bool) {
	if len(ir.msgs) > 0 {
		ir.buf.WriteByte(',')
	}
	ir.buf.WriteString(`{"role":`)
	writeString(&ir.buf, role)
	ir.buf.WriteString(`,"content":`)
	ir.buf.Write(content)
	ir.buf.WriteByte('}')
	ir.msgs = append(ir.msgs, clientMessage{Role: role, Content: text, IsString: isString})
	ir.ends = append(ir.ends, ir.buf.Len())
}

func readResponsesInput(in jsontext.Value, hasContractInput bool) (*inputReader, *APIError) {
	ir := &inputReader{}
	ir.buf.Grow(len(in) + 64)
	ir.buf.WriteByte('[')
	switch in.Kind() {
	case '"':
		ir.add("user", in, stringValue(in), true)
	case '[':
		if aerr := ir.items(in); aerr != nil {
			return nil, aerr
		}
		if len(ir.msgs) == 0 && !hasContractInput {
			return nil, badRequest(CodeInputSchemaViolation, "input", "input is an empty list; send a user message or contract_input")
		}
	default:
		return nil, badRequest(CodeInvalidJSON, "input", "input must be a string or a list of message items")
	}
	ir.buf.WriteByte(']')
	ir.finish()
	return ir, nil
}

func itemParam(i int, rest string) string { return fmt.Sprintf("input[%d]%s", i, rest) }

// badMessageContent answers message content that is not a string or a
// list of parts each with a string type: 400 invalid_message naming the
// message's content, on this edge as on chat completions.
func badMessageContent(item int) *APIError {
	return badRequest(CodeInvalidMessage, itemParam(item, ".content"),
		"content must be a string or a list of parts each with a string type")
}

// items reads the message items of a list (a valid JSON array: the body
// was parsed whole before).
func (ir *inputReader) items(in jsontext.Value) *APIError {
	d := getDecoder(in)
	defer d.release()
	dec := &d.dec
	_, _ = dec.ReadToken() // '['
	var content, parts bytes.Buffer
	var texts []string
	for i := 0; dec.PeekKind() != ']'; i++ {
		if dec.PeekKind() != '{' {
			return badRequest(CodeInvalidJSON, itemParam(i, ""), "each input item must be a message object with a role and content")
		}
		_, _ = dec.ReadToken()
		var typ, role string
		hasType, roleOK := false, false
		contentKind := byte(0)
		content.Reset()
		texts = texts[:0]
		for dec.PeekKind() != '}' {
			name, _ := dec.ReadToken()
			switch key := name.String(); key {
			case "type", "role":
				if dec.PeekKind() != '"' {
					v, _ := dec.ReadValue()
					if key == "type" && v.Kind() != 'n' {
						return badRequest(CodeUnsupportedParameter, itemParam(i, ".type"), "input item type must be \"message\"")
					}
					continue
				}
				tok, _ := dec.ReadToken()
				if key == "type" {
					typ, hasType = tok.String(), true
				} else {
					role, roleOK = tok.String(), true
				}
			case "content":
				switch contentKind = byte(dec.PeekKind()); contentKind {
				case '"':
					v, _ := dec.ReadValue()
					content.Write(v)
				case '[':
					if aerr := readParts(dec, &parts, &texts, i); aerr != nil {
						return aerr
					}
					content.Write(parts.Bytes())
				default:
					_ = dec.SkipValue()
				}
			default:
				_ = dec.SkipValue()
			}
		}
		_, _ = dec.ReadToken() // '}'
		if hasType && typ != "message" {
			return badRequest(CodeUnsupportedParameter, itemParam(i, ".type"), "input items of type %s are not supported on contract routes", quoteForMessage(typ))
		}
		switch {
		case !roleOK:
			return badRequest(CodeInvalidJSON, itemParam(i, ".role"), "each input message needs a role")
		case role != "user" && role != "assistant" && role != "system" && role != "developer":
			return badRequest(CodeInvalidJSON, itemParam(i, ".role"), "role must be user, assistant, system or developer")
		}
		switch contentKind {
		case '"':
			ir.add(role, content.Bytes(), stringValue(content.Bytes()), true)
		case '[':
			ir.add(role, content.Bytes(), strings.Join(texts, "\n"), false)
		case 0:
			return badRequest(CodeInvalidJSON, itemParam(i, ".content"), "each input message needs content: a string or a list of input_text parts")
		default: // null among them: not content on this edge, whatever the role
			return badMessageContent(i)
		}
	}
	return nil
}

// readParts maps input_text (and, in replayed assistant turns, output_text)
// parts to chat text parts. Other part types (images, files, audio) are
// refused rather than silently dropped.
func readParts(dec *jsontext.Decoder, out *bytes.Buffer, texts *[]string, item int) *APIError {
	out.Reset()
	out.WriteByte('[')
	_, _ = dec.ReadToken() // '['
	var text []byte
	for j := 0; dec.PeekKind() != ']'; j++ {
		param := func(rest string) string { return itemParam(item, fmt.Sprintf(".content[%d]%s", j, rest)) }
		if dec.PeekKind() != '{' {
			return badMessageContent(item)
		}
		_, _ = dec.ReadToken()
		typ, typeOK, textOK := "", false, false
		for dec.PeekKind() != '}' {
			name, _ := dec.ReadToken()
			switch name.String() {
			case "type":
				if dec.PeekKind() == '"' {
					tok, _ := dec.ReadToken()
					typ, typeOK = tok.String(), true
					continue
				}
				_ = dec.SkipValue()
			case "text":
				v, _ := dec.ReadValue()
				if textOK = v.Kind() == '"'; textOK {
					text = append(text[:0], v...)
				}
			default:
				_ = dec.SkipValue()
			}
		}
		_, _ = dec.ReadToken() // '}'
		if !typeOK {
			return badMessageContent(item)
		}
		if typ != "input_text" && typ != "output_text" {
			return badRequest(CodeUnsupportedParameter, param(".type"),
				"content parts of type %s are not supported on contract routes (input_text only)", quoteForMessage(typ))
		}
		if !textOK {
			return badRequest(CodeInvalidMessage, itemParam(item, ".content"), "an %s part's text must be a string", typ)
		}
		if j > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`{"type":"text","text":`)
		out.Write(text)
		out.WriteByte('}')
		*texts = append(*texts, stringValue(text))
	}
	_, _ = dec.ReadToken() // ']'
	out.WriteByte(']')
	return nil
}

// textFormat maps text.format onto chat's response_format, so whatever
// reads the client's requested schema sees it in one place on both edges.
// The route still decides what is sent upstream.
func textFormat(text jsontext.Value) (jsontext.Value, *APIError) {
	if text.Kind() == 'n' {
		return nil, nil
	}
	var t struct {
		Format map[string]json.RawMessage `json:"format"`
	}
	if text.Kind() != '{' || json.Unmarshal(text, &t) != nil {
		return nil, badRequest(CodeInvalidJSON, "text", "text must be an object")
	}
	if t.Format == nil {
		return nil, nil
	}
	var typ string
	_ = json.Unmarshal(t.Format["type"], &typ)
	if typ != "json_schema" {
		return mustJSON(map[string]string{"type": typ}), nil
	}
	js := make(map[string]json.RawMessage, len(t.Format))
	for k, v := range t.Format {
		if k != "type" {
			js[k] = v
		}
	}
	return mustJSON(map[string]any{"type": "json_schema", "json_schema": js}), nil
}

// responsesParam names the Responses field for an error the shared
// pipeline raised about the chat request it was given.
func responsesParam(e *APIError) {
	if e.Param != nil && strings.HasPrefix(*e.Param, "messages") {
		e.Param = strPtr("input")
	}
}

type responseContent struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
}

type responseItem struct {
	Type    string            `json:"type"`
	ID      string            `json:"id"`
	Status  string            `json:"status"`
	Role    string            `json:"role"`
	Content []responseContent `json:"content"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responseObject is the Responses API's response. Besides id, object,
// created_at, status, model, output, usage and contract it carries every member the official SDKs' Response type requires
// (openai-go's decoder leaves a missing one at its zero value without a
// word). It echoes the request as used: metadata and top_p are the
// client's JSON (forwarded upstream byte-for-byte; null when it sent none),
// temperature the accepted attempt's (the route's retry plan sets it per
// attempt; the client's is never sent), instructions null (a route with
// client_system: drop drops them, one with reject refuses them, so none
// reached the model).
// parallel_tool_calls is false, tool_choice "none" and tools [] (a
// contract route refuses tools). access_programs, OpenAI's own access
// program, is left out.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Error             *struct{}       `json:"error"`
	IncompleteDetails *struct{}       `json:"incomplete_details"`
	Instructions      *struct{}       `json:"instructions"`
	Metadata          json.RawMessage `json:"metadata"`
	Model             string          `json:"model"`
	Output            []responseItem  `json:"output"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	Temperature       *float64        `json:"temperature"`
	ToolChoice        string          `json:"tool_choice"`
	Tools             []struct{}      `json:"tools"`
	TopP              json.RawMessage `json:"top_p"`
	Usage             *responseUsage  `json:"usage"`
	Contract          *contractInfo   `json:"contract,omitempty"`
}

// clientValue is the named member of the request as the client sent it,
// or nil when it sent none or null. A subslice of the body: no copy.
func (p *Prepared) clientValue(name string) json.RawMessage {
	if p == nil {
		return nil
	}
	v, ok := p.body.get(name)
	if !ok || v.Kind() == 'n' {
		return nil
	}
	return json.RawMessage(v)
}

// responseBody is the accepted verdict as a completed response object.
func responseBody(v *verdict, route *config.Route, id string, p *Prepared) responseObject {
	created := v.comp.Resp.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	ci := info(v, route, route.Contract)
	var temp *float64
	if n := len(v.attempts); n > 0 {
		t := v.attempts[n-1].Temperature
		temp = &t
	}
	return responseObject{ID: "resp_" + id, Object: "response", CreatedAt: created, Status: "completed",
		Metadata: p.clientValue("metadata"), Model: v.comp.Resp.Model, Temperature: temp, ToolChoice: "none", Tools: []struct{}{},
		TopP: p.clientValue("top_p"),
		Output: []responseItem{{Type: "message", ID: "msg_" + id, Status: "completed", Role: "assistant",
			Content: []responseContent{{Type: "output_text", Text: string(v.result.JSON), Annotations: []struct{}{}}}}},
		Usage:    &responseUsage{InputTokens: v.usage.PromptTokens, OutputTokens: v.usage.CompletionTokens, TotalTokens: v.usage.TotalTokens},
		Contract: &ci}
}

func writeResponse(w http.ResponseWriter, v *verdict, route *config.Route, id string, p *Prepared) {
	if !p.Stream {
		writeBody(w, http.StatusOK, func(b []byte) []byte { return appendResponseSuccess(b, v, route, id, p) })
		return
	}
	writeResponseStream(w, responseBody(v, route, id, p))
}

// writeResponseStream sends an accepted verdict as the Responses API's
// standard event sequence. As on chat, nothing is sent before the verdict.
func writeResponseStream(w http.ResponseWriter, done responseObject) {
	bw := startSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		bw.WriteString("event: ")
		bw.WriteString(typ)
		bw.WriteString("\ndata: ")
		bw.Write(mustJSON(fields))
		bw.WriteString("\n\n")
	}
	item := done.Output[0]
	text := item.Content[0].Text
	progress := done
	progress.Status, progress.Output, progress.Usage, progress.Contract = "in_progress", []responseItem{}, nil, nil
	send("response.created", map[string]any{"response": progress})
	send("response.in_progress", map[string]any{"response": progress})
	added := item
	added.Status, added.Content = "in_progress", []responseContent{}
	send("response.output_item.added", map[string]any{"output_index": 0, "item": added})
	empty := responseContent{Type: "output_text", Text: "", Annotations: []struct{}{}}
	send("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "part": empty})
	send("response.output_text.delta", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "delta": text, "logprobs": []struct{}{}})
	send("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []struct{}{}})
	send("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "part": item.Content[0]})
	send("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	send("response.completed", map[string]any{"response": done})
	bw.Flush()
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// PrepareAny is Prepare for a stored client body of either API (a review
// item keeps the body as the client sent it): a Responses body, one with
// "input" and no "messages", goes through the Responses adapter first.
func PrepareAny(route *config.Route, body []byte) (*Prepared, *APIError) {
	obj, err := parseObject(body)
	if err != nil {
		return nil, badRequest(CodeInvalidJSON, "", "request body is not a valid JSON object: %s", jsonErr(err))
	}
	_, hasInput := obj.get("input")
	if _, hasMessages := obj.get("messages"); !hasInput || hasMessages {
		return prepareObject(route, obj)
	}
	chat, msgs, aerr := responsesToChat(route, obj)
	if aerr != nil {
		return nil, aerr
	}
	return prepare(route, chat, msgs)
}

// RenderResponses is Render for a Responses API request body: on a
// contract route, the chat body attempt n sends upstream; on a passthrough
// route, the body forwarded to the upstream's /responses.
func RenderResponses(route *config.Route, body []byte, n int) ([]byte, error) {
	if route.Passthrough {
		return Render(route, body, n)
	}
	obj, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	chat, _, aerr := responsesToChat(route, obj)
	if aerr != nil {
		return nil, errors.New(aerr.Message)
	}
	return Render(route, chat.apply(nil), n)
}
