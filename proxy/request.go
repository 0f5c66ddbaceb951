package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"unsafe"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/jsonstr"
	"github.com/contractd/contractd/retry"
	"github.com/go-json-experiment/json/jsontext"
)

// clientMessage is one client message: what we read of it plus its exact
// bytes for forwarding.
type clientMessage struct {
	Role     string
	Content  string // text content (string content, or the text parts joined)
	IsString bool   // content was a JSON string
	Raw      jsontext.Value
	// quoted is the content's JSON string as sent when it is exactly
	// quoteJSON(Content) (nil otherwise): input_sha256 reads it in place.
	quoted jsontext.Value
}

// Prepared is a contract-route request after every client-side check: what
// each attempt's upstream body is built from.
type Prepared struct {
	Route        *config.Route
	body         object
	messages     []clientMessage // client messages, system/developer removed when dropped
	Input        any             // template .Input: input object, or last user text
	inJSON       []byte          // canonical bytes of the input; read through inputJSON, which quotes it on first use
	Subject      contracts.Subject
	Stream       bool
	IncludeUsage bool
	// counter is the route model's token counter, looked up on first use
	// (tokens): only a shortening attempt or a token budget reads it.
	counter retry.Counter
	// first hashes attempt 1's messages JSON, to tell "shortened": keeping
	// the bytes would hold a copy of a large body through every call.
	// shortens says the plan has an attempt that shortens (else no
	// attempt's messages differ and none is hashed).
	first    uint64
	shortens bool
	// lastUserJSON is the last user message's content as sent, when that
	// is its canonical quoting (nil: quote it).
	lastUserJSON []byte
	// quoteInput: the input is the last user message, and inJSON its
	// quoteJSON, made on first use (only the audit line and a review item
	// read it).
	quoteInput bool
}

// unsupported are request fields a contract route cannot honour.
var unsupported = []string{"tools", "functions", "tool_choice", "function_call"}

// Prepare runs the request checks that follow routing (parameters,
// client system messages, input) and renders nothing yet.
func Prepare(r *config.Route, body []byte) (*Prepared, *APIError) {
	obj, err := parseObject(body)
	if err != nil {
		return nil, badRequest(CodeInvalidJSON, "", "request body is not a valid JSON object: %s", jsonErr(err))
	}
	return prepareObject(r, obj)
}

func prepareObject(r *config.Route, obj object) (*Prepared, *APIError) { return prepare(r, obj, nil) }

// prepare is prepareObject with the client messages already read (nil:
// read them from obj, after the parameter checks, in the documented order).
func prepare(r *config.Route, obj object, read []clientMessage) (*Prepared, *APIError) {
	p := &Prepared{Route: r, body: obj}
	for _, a := range r.Plan {
		p.shortens = p.shortens || a.Shorten != nil
	}
	for _, name := range unsupported {
		if v, ok := obj.get(name); ok && v.Kind() != 'n' {
			return nil, badRequest(CodeUnsupportedParameter, name, "%s is not supported on contract routes", name)
		}
	}
	if v, ok := obj.get("n"); ok && v.Kind() != 'n' {
		if n, err := strconv.ParseFloat(string(v), 64); err != nil || n != 1 {
			return nil, badRequest(CodeUnsupportedParameter, "n", "n must be 1 on contract routes")
		}
	}
	if v, ok := obj.get("stream"); ok {
		switch v.Kind() {
		case 't':
			p.Stream = true
		case 'f', 'n':
		default:
			return nil, badRequest(CodeInvalidJSON, "stream", "stream must be a boolean")
		}
	}
	if v, ok := obj.get("stream_options"); ok && p.Stream && v.Kind() == '{' {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if json.Unmarshal(v, &so) == nil {
			p.IncludeUsage = so.IncludeUsage
		}
	}
	msgs := read
	if msgs == nil {
		var aerr *APIError
		if msgs, aerr = readMessages(obj); aerr != nil {
			return nil, aerr
		}
	}
	kept, copied := msgs, false // msgs itself unless a message is dropped
	for i, m := range msgs {
		if m.Role == "system" || m.Role == "developer" {
			if r.ClientSystem != config.ClientSystemDrop {
				return nil, badRequest(CodeClientSystem, fmt.Sprintf("messages[%d]", i),
					"route %q does not accept %s messages; its prompt is registered in contractd (%s)", r.Name, m.Role, clientSystemHint)
			}
			if !copied {
				kept, copied = msgs[:i:i], true // the appends below copy: msgs stays as read
			}
			continue
		}
		if copied {
			kept = append(kept, m)
		}
	}
	p.messages = kept
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			p.Subject.LastUser, p.Subject.HasLastUser = msgs[i].Content, true
			p.lastUserJSON = msgs[i].quoted
			break
		}
	}
	if aerr := p.readInput(obj); aerr != nil {
		return nil, aerr
	}
	return p, nil
}

// readMessages reads obj's messages. obj's members are valid JSON (obj
// came from parseObject, or was built by contractd): they are split without
// decoding them again (splitArray), the validating parser being only the
// fallback that words the error.
func readMessages(obj object) ([]clientMessage, *APIError) {
	raw, ok := obj.get("messages")
	if !ok || raw.Kind() == 'n' {
		return nil, nil
	}
	if raw.Kind() != '[' {
		return nil, badRequest(CodeInvalidJSON, "messages", "messages must be an array")
	}
	// Items and their members alias the body (splitArray, splitObject):
	// a large message is not copied to be looked at.
	var itemsBuf [4]jsontext.Value
	items, ok := splitArray(itemsBuf[:0], raw)
	if !ok {
		var err error
		if items, err = parseArray(raw); err != nil {
			return nil, badRequest(CodeInvalidJSON, "messages", "messages must be an array of objects")
		}
	}
	out := make([]clientMessage, 0, len(items))
	var scratch [8]member // a message's members, reused from one to the next
	for i, it := range items {
		var m struct {
			Role    string
			HasRole bool
			Content jsontext.Value
		}
		if it.Kind() == '{' {
			mo, ok := splitObject(scratch[:0], it)
			if !ok {
				var err error
				if mo, err = appendObject(scratch[:0], it); err != nil {
					mo = nil
				}
			}
			if mo != nil {
				if v, ok := mo.get("role"); ok && v.Kind() == '"' {
					m.Role, m.HasRole = roleValue(v), true
				}
				m.Content, _ = mo.get("content")
				clear(mo) // drop the references into the body
			}
		}
		if !m.HasRole {
			return nil, badRequest(CodeInvalidJSON, fmt.Sprintf("messages[%d]", i), "each message must be an object with a string role")
		}
		cm := clientMessage{Role: m.Role, Raw: it}
		badContent := func() *APIError {
			return badRequest(CodeInvalidMessage, fmt.Sprintf("messages[%d].content", i),
				"content must be a string, null, or a list of parts each with a string type")
		}
		switch c := bytes.TrimSpace(m.Content); {
		case len(c) == 0 || string(c) == "null":
			// Only an assistant turn may have no content (it carries
			// tool_calls instead); a provider refuses any other without.
			if cm.Role != "assistant" {
				return nil, badRequest(CodeInvalidMessage, fmt.Sprintf("messages[%d].content", i),
					"a %s message must have content: a string or a list of parts each with a string type; only assistant turns may omit it or send null", cm.Role)
			}
		case c[0] == '"':
			if in := c[1 : len(c)-1]; bytes.IndexByte(in, '\\') < 0 {
				cm.Content = string(in) // a copy: it outlives the body's buffer
				if quotedAsIs(in) {
					cm.quoted = c
				}
			} else {
				// c was read whole by a strict decoder (or written by
				// contractd): its escapes are well formed and its UTF-8
				// valid, so the one-pass unquote gives json v2's value.
				u := jsonstr.AppendUnquote(make([]byte, 0, len(in)), c)
				cm.Content = unsafe.String(unsafe.SliceData(u), len(u)) // u is this string's own
			}
			cm.IsString = true
		case c[0] == '[':
			// A part's type must be present and a string: a provider that
			// validates would otherwise turn the client's mistake into a 502.
			var parts []struct {
				Type *string `json:"type"`
				Text string  `json:"text"`
			}
			if json.Unmarshal(c, &parts) != nil {
				return nil, badContent()
			}
			var texts []string
			for _, pt := range parts {
				if pt.Type == nil {
					return nil, badContent()
				}
				if *pt.Type == "text" {
					texts = append(texts, pt.Text)
				}
			}
			cm.Content = strings.Join(texts, "\n")
		default:
			return nil, badContent()
		}
		out = append(out, cm)
	}
	return out, nil
}

// inputJSON is the input's canonical bytes (input_sha256, the audit's and
// the review item's input).
func (p *Prepared) inputJSON() []byte {
	if p.quoteInput {
		p.inJSON, p.quoteInput = quoteJSON(p.Subject.LastUser), false
	}
	return p.inJSON
}

// readInput resolves the template input: contract_input, else
// the last user message (parsed as a JSON object when the prompt has an
// input schema).
func (p *Prepared) readInput(obj object) *APIError {
	prompt := p.Route.Prompt
	ci, hasCI := obj.get("contract_input")
	if hasCI && ci.Kind() == 'n' {
		hasCI = false
	}
	if prompt.InputSchema == nil {
		// without an input schema .Input is the last user message's
		// text; contract_input only stands in when there is no user message.
		if p.Subject.HasLastUser {
			p.Input = p.Subject.LastUser
			p.inJSON = p.lastUserJSON // in place: no copy of a large message
			p.quoteInput = p.inJSON == nil
			return nil
		}
		if !hasCI {
			return badRequest(CodeInputSchemaViolation, "messages", "the request needs a user message")
		}
		if ci.Kind() == '"' {
			var s string
			_ = json.Unmarshal(ci, &s)
			p.Input, p.inJSON = s, ci
			return nil
		}
		v, err := contracts.DecodeJSON(ci)
		if err != nil {
			return badRequest(CodeInvalidJSON, "contract_input", "contract_input is not valid JSON")
		}
		p.Input, p.inJSON = v, ci
		p.Subject.Input = v
		return nil
	}
	var src []byte
	param := "contract_input"
	if hasCI {
		if ci.Kind() != '{' {
			return badRequest(CodeInputSchemaViolation, param, "contract_input must be a JSON object")
		}
		src = ci
	} else {
		param = "messages"
		if !p.Subject.HasLastUser {
			return badRequest(CodeInputSchemaViolation, param, "the request needs contract_input or a user message holding a JSON object")
		}
		src = []byte(strings.TrimSpace(p.Subject.LastUser))
		if len(src) == 0 || src[0] != '{' {
			return badRequest(CodeInputSchemaViolation, param, "the last user message must be a JSON object matching the route's input schema")
		}
	}
	v, err := contracts.DecodeJSON(src)
	if err != nil {
		return badRequest(CodeInputSchemaViolation, param, "the input is not a valid JSON object: %v", err)
	}
	if vs := prompt.InputSchema.Validate(v); len(vs) > 0 {
		vs = contracts.SortViolations(vs)
		return badRequest(CodeInputSchemaViolation, param, "input does not match the route's input schema: %s", describe(vs))
	}
	p.Input, p.inJSON = v, src
	p.Subject.Input = v
	return nil
}

func describe(vs []contracts.Violation) string {
	const max = 5
	parts := make([]string, 0, max)
	for i, v := range vs {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(vs)-max))
			break
		}
		path := v.Path
		if path == "" {
			path = "root" // as the 422's message writes it; "/" is the pointer to key ""
		}
		parts = append(parts, fmt.Sprintf("%s: %s", path, v.Message))
	}
	return strings.Join(parts, "; ")
}

// attemptBody is what one attempt sends and what it measured.
type attemptBody struct {
	Body        []byte
	System      string // rendered system prompt sent
	InputTokens int    // offline count of every message sent
	Shortened   bool
}

// tokens is the route model's token counter (retry.CounterFor), found on
// the first call: most requests shorten nothing and have no budget, and
// finding it costs a walk of the model prefixes on every request.
func (p *Prepared) tokens() retry.Counter {
	if p.counter == nil {
		p.counter = retry.CounterFor(p.Route.Model)
	}
	return p.counter
}

// Build renders attempt a's upstream body: the client's object with only
// the members the route controls replaced (model, messages with the
// rendered prompt first, temperature, the token limit, seed, stream,
// response_format) and the contract-only ones removed; everything else is
// forwarded as the client wrote it.
func (p *Prepared) Build(a retry.Attempt) (*attemptBody, *APIError) {
	return p.build(a, nil)
}

// build is Build writing the body into dst's memory (grown if too small).
func (p *Prepared) build(a retry.Attempt, dst []byte) (*attemptBody, *APIError) {
	r := p.Route
	input := p.Input
	if a.Shorten != nil && r.Prompt.HasUser() {
		switch in := input.(type) {
		case map[string]any:
			input = retry.ShortenInput(in, *a.Shorten, p.tokens())
		case string:
			input = retry.Cut(in, a.Shorten.Ratio, r.Budget.MaxInputTokens, a.Shorten.Keep, p.tokens())
		}
	}
	sys, quoted, static := r.Prompt.StaticSystem()
	var data contracts.TemplateData // read only by a template rendered per request
	if !static || r.Prompt.HasUser() {
		data = contracts.TemplateData{Input: input, Messages: make([]contracts.Message, len(p.messages))}
		for i, m := range p.messages {
			data.Messages[i] = contracts.Message{Role: m.Role, Content: m.Content}
		}
	}
	if !static {
		var err error
		if sys, err = r.Prompt.RenderSystem(data); err != nil {
			return nil, badRequest(CodeInputSchemaViolation, "", "the input cannot fill route %q's prompt: %s", r.Name, templateErr(err))
		}
	}
	var textsBuf [4]string // on the stack for the usual few messages
	texts := append(textsBuf[:0], sys)
	user, hasUser, err := r.Prompt.RenderUser(data)
	if err != nil {
		return nil, badRequest(CodeInputSchemaViolation, "", "the input cannot fill route %q's prompt: %s", r.Name, templateErr(err))
	}
	// The messages sent after the system prompt, as JSON objects: the
	// client's own bytes unless the prompt renders the user turn or the
	// attempt shortens.
	var rendered []byte
	var rawsBuf [4][]byte
	raws := rawsBuf[:0]
	switch {
	case hasUser:
		rendered = append(appendString([]byte(`{"role":"user","content":`), user), '}')
		raws = append(raws, rendered)
		texts = append(texts, user)
	case a.Shorten != nil:
		// Keep the last user message only, its content cut.
		for i := len(p.messages) - 1; i >= 0; i-- {
			m := p.messages[i]
			if m.Role != "user" {
				continue
			}
			raw, content := p.shortenMessage(m, a.Shorten)
			raws = append(raws, raw)
			texts = append(texts, content)
			break
		}
	default:
		for _, m := range p.messages {
			raws = append(raws, m.Raw)
			texts = append(texts, m.Content)
		}
	}
	size := len(quoted) + len(sys) + len(sys)/8 + 64
	for _, raw := range raws {
		size += len(raw) + 1
	}
	// The messages are written once, straight into the upstream body.
	var from, to int
	fill := func(b []byte) []byte {
		from = len(b)
		b = append(b, `[{"role":"system","content":`...)
		if static {
			b = append(b, quoted...)
		} else {
			b = appendString(b, sys)
		}
		b = append(b, '}')
		for _, raw := range raws {
			b = append(append(b, ','), raw...)
		}
		b = append(b, ']')
		to = len(b)
		return b
	}
	ab := &attemptBody{System: sys}
	if r.Budget != (retry.Budget{}) {
		// Offline counting costs about 25 µs per KB with tiktoken; only
		// budgets need it (shortening counts what it cuts itself). A static
		// system prompt is counted once per route: counts are per message,
		// so its kept count is exact.
		if static {
			ab.InputTokens = retry.CountMessagesAfter(p.tokens(), r.SystemTokens.Count(p.tokens(), sys), texts[1:])
		} else {
			ab.InputTokens = retry.CountMessages(p.tokens(), texts)
		}
	}
	// The edits and their small values on this stack: applyTo copies them.
	var small [64]byte
	es := p.edits(small[:0], fill, size, a.Temperature)
	ab.Body = p.body.applyTo(dst, es[:])
	// Only a plan that shortens can send other messages than attempt 1's
	// (the rendering is the same for the same input): only then are they
	// hashed, which costs a pass over a large body.
	if p.shortens {
		if h := maphash.Bytes(firstSeed, ab.Body[from:to]) | 1; p.first == 0 {
			p.first = h
		} else {
			ab.Shortened = p.first != h
		}
	}
	return ab, nil
}

// shortenMessage cuts a user message's content (to ratio of its
// tokens, or max_input_tokens if smaller), keeping its other fields as
// sent. Content given as parts has each text part cut the same way and its
// other parts (images…) kept; before, such a message was sent uncut.
func (p *Prepared) shortenMessage(m clientMessage, sh *retry.Shorten) ([]byte, string) {
	cut := func(t string) string {
		return retry.Cut(t, sh.Ratio, p.Route.Budget.MaxInputTokens, sh.Keep, p.tokens())
	}
	mo, err := parseObject(m.Raw)
	if err != nil { // cannot happen: Raw was read from a parsed body
		return m.Raw, m.Content
	}
	if m.IsString {
		c := cut(m.Content)
		return mo.apply([]edit{{Name: "content", Value: mustJSON(c)}}), c
	}
	cv, _ := mo.get("content")
	var parts []jsontext.Value
	if cv.Kind() != '[' || json.Unmarshal(cv, &parts) != nil {
		return m.Raw, m.Content
	}
	var texts []string
	var arr bytes.Buffer
	arr.WriteByte('[')
	for i, pt := range parts {
		if i > 0 {
			arr.WriteByte(',')
		}
		po, err := parseObject(pt)
		typ, _ := po.get("type")
		txt, ok := po.get("text")
		if err != nil || unquoteJSON(typ) != "text" || !ok || txt.Kind() != '"' {
			arr.Write(pt)
			continue
		}
		c := cut(unquoteJSON(txt))
		arr.Write(po.apply([]edit{{Name: "text", Value: mustJSON(c)}}))
		texts = append(texts, c)
	}
	arr.WriteByte(']')
	return mo.apply([]edit{{Name: "content", Value: arr.Bytes()}}), strings.Join(texts, "\n")
}

// numEdits is how many members edits replaces or removes.
const numEdits = 11

// edits returns the upstream body's edits, their small values appended
// to sc.
func (p *Prepared) edits(sc []byte, messages func([]byte) []byte, size int, temp float64) [numEdits]edit {
	r := p.Route
	maxField, otherField := "max_tokens", "max_completion_tokens"
	if r.Upstream.MaxTokensParam == "max_completion_tokens" {
		maxField, otherField = otherField, maxField
	}
	// The small values share one buffer.
	sc = jsonstr.Append(sc, r.Model)
	model := sc[:len(sc):len(sc)]
	sc = strconv.AppendFloat(sc, temp, 'f', -1, 64)
	temperature := sc[len(model):len(sc):len(sc)]
	n := len(sc)
	sc = strconv.AppendInt(sc, int64(r.MaxOutputTokens), 10)
	maxTokens := sc[n:len(sc):len(sc)]
	es := [numEdits]edit{
		{Name: "model", Value: model},
		{Name: "messages", Fill: messages, Size: size},
		{Name: "temperature", Value: temperature},
		{Name: maxField, Value: maxTokens},
		{Name: otherField},
		{Name: "seed"},
		{Name: "stream", Value: jsonFalse},
		{Name: "response_format"},
		{Name: "stream_options"},
		{Name: "n"},
		{Name: "contract_input"},
	}
	if r.Seed != nil {
		es[5].Value = []byte(strconv.FormatInt(*r.Seed, 10))
	}
	es[7].Value = r.ResponseFormatJSON
	return es
}

// Values edits sets as they are (applyTo only copies them).
var jsonFalse = []byte("false")

// firstSeed hashes attempt 1's messages (Prepared.first).
var firstSeed = maphash.MakeSeed()

func templateErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "executing") {
		return s[i+2:]
	}
	return strings.TrimPrefix(s, "template: ")
}

func jsonErr(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "jsontext: ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
