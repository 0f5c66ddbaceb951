package proxy

import (
	"net/http"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/internal/jsonstr"
)

// The accepted answer is written by appending to one pooled buffer: no
// reflection, no intermediate structs, and the accepted content quoted
// straight from the validated bytes, or copied from the reply's own string
// literal when that is exactly the same quoting (appendOutput). The output
// is byte for byte what encoding/json writes for successResponse
// (TestAppendChatSuccessMatches, FuzzAppendOutputQuotedAsReplied).

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// writeBody answers status with a JSON body built by fill, in one Write
// with its Content-Length set, so net/http sends headers and body together.
func writeBody(w http.ResponseWriter, status int, fill func([]byte) []byte) {
	bp := bodyPool.Get().(*[]byte)
	b := fill((*bp)[:0])
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if cap(b) <= 64<<10 { // do not keep a rare huge answer's buffer
		*bp = b
		bodyPool.Put(bp)
	}
}

// appendChatSuccess appends the chat completion of an accepted verdict
// (successBody's JSON) and a newline.
func appendChatSuccess(b []byte, v *verdict, route *config.Route, k *contracts.Contract) []byte {
	resp := &v.comp.Resp
	id, created := replyID(resp)
	b = jsonstr.AppendField(b, `{"id":`, id)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = jsonstr.AppendField(b, `,"model":`, resp.Model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = appendOutput(b, v)
	b = append(b, `,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":`...)
	b = v.usage.AppendJSON(b)
	if resp.SystemFingerprint != "" {
		b = jsonstr.AppendField(b, `,"system_fingerprint":`, resp.SystemFingerprint)
	}
	b = append(b, `,"contract":`...)
	b = appendContractInfo(b, v, route, k)
	return append(b, "}\n"...)
}

// appendResponseSuccess appends the completed response object of an
// accepted verdict (responseBody's JSON) and a newline. metadata and top_p
// are the client's bytes as sent (null when it sent none), temperature the
// accepted attempt's (echoes).
func appendResponseSuccess(b []byte, v *verdict, route *config.Route, id string, p *Prepared) []byte {
	created := v.comp.Resp.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	b = append(b, `{"id":`...)
	b = appendPrefixedString(b, "resp_", id)
	b = append(b, `,"object":"response","created_at":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"metadata":`...)
	b = appendRawOrNull(b, p.clientValue("metadata"))
	b = append(b, `,"model":`...)
	b = jsonstr.Append(b, v.comp.Resp.Model)
	b = append(b, `,"output":[{"type":"message","id":`...)
	b = appendPrefixedString(b, "msg_", id)
	b = append(b, `,"status":"completed","role":"assistant","content":[{"type":"output_text","text":`...)
	b = appendOutput(b, v)
	b = append(b, `,"annotations":[]}]}],"parallel_tool_calls":false,"temperature":`...)
	b = appendAttemptTemperature(b, v)
	b = append(b, `,"tool_choice":"none","tools":[],"top_p":`...)
	b = appendRawOrNull(b, p.clientValue("top_p"))
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(v.usage.PromptTokens), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(v.usage.CompletionTokens), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(v.usage.TotalTokens), 10)
	b = append(b, `},"contract":`...)
	b = appendContractInfo(b, v, route, route.Contract)
	return append(b, "}\n"...)
}

// appendRawOrNull appends raw (JSON the client sent, so valid) or null.
func appendRawOrNull(b []byte, raw []byte) []byte {
	if raw == nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendAttemptTemperature appends the accepted attempt's temperature as
// the attempt's body spells it, or null when no attempt is recorded.
func appendAttemptTemperature(b []byte, v *verdict) []byte {
	if len(v.attempts) == 0 {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v.attempts[len(v.attempts)-1].Temperature, 'f', -1, 64)
}

// appendPrefixedString appends prefix+s quoted as JSON without building
// the concatenation: s is quoted after the prefix, then its opening quote
// is dropped (prefix needs no escaping).
func appendPrefixedString(b []byte, prefix, s string) []byte {
	b = append(b, '"')
	b = append(b, prefix...)
	mark := len(b)
	b = jsonstr.Append(b, s)
	return append(b[:mark], b[mark+1:]...)
}

// appendContractInfo appends info(v, route, k)'s JSON.
func appendContractInfo(b []byte, v *verdict, route *config.Route, k *contracts.Contract) []byte {
	b = jsonstr.AppendField(b, `{"route":`, route.Name)
	b = jsonstr.AppendField(b, `,"contract":`, k.Name)
	b = jsonstr.AppendField(b, `,"contract_sha256":`, k.SHA256)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(len(v.attempts)), 10)
	b = append(b, `,"evidence":[`...)
	for i, e := range v.result.Evidence {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.AppendField(b, `{"path":`, e.Path)
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, int64(e.Start), 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, int64(e.End), 10)
		b = jsonstr.AppendField(b, `,"sha256":`, e.SHA256)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendOutput appends the accepted output, v.result.JSON, quoted as
// jsonstr.Append quotes it. When the output is the reply's content, or
// that content with JSON whitespace trimmed at its ends (what strict
// extraction accepts), and the reply quoted the content exactly as Append
// would (Completion.quoted), the reply's own bytes for that span are
// copied instead of quoting 1–2 KB again, character by character.
func appendOutput(b []byte, v *verdict) []byte {
	if q, ok := quotedSpan(v.comp, v.result.JSON); ok {
		b = append(b, '"')
		b = append(b, q...)
		return append(b, '"')
	}
	return appendJSONBytesAsString(b, v.result.JSON)
}

// quotedSpan is the part of c.quoted, without its quotes, that Append
// writes for out, when out lies in c.Output with only JSON whitespace
// (space, tab, newline, carriage return) before and after it. Append
// writes each character on its own (a space as itself, the other three
// as two-byte escapes), so those ends are cut from the literal by count.
func quotedSpan(c *Completion, out []byte) ([]byte, bool) {
	if c == nil || c.quoted == nil || len(out) == 0 || len(c.Output) == 0 {
		return nil, false
	}
	base := uintptr(unsafe.Pointer(unsafe.StringData(c.Output)))
	at := uintptr(unsafe.Pointer(&out[0]))
	if at < base || at-base+uintptr(len(out)) > uintptr(len(c.Output)) {
		return nil, false
	}
	i := int(at - base)
	head, tail := escapedWS(c.Output[:i]), escapedWS(c.Output[i+len(out):])
	if head < 0 || tail < 0 {
		return nil, false
	}
	q := c.quoted[1 : len(c.quoted)-1]
	return q[head : len(q)-tail], true
}

// escapedWS is the length Append gives s when s is JSON whitespace only,
// else -1.
func escapedWS(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			n++
		case '\t', '\n', '\r':
			n += 2
		default:
			return -1
		}
	}
	return n
}

// appendJSONBytesAsString is jsonstr.Append for bytes (the validated
// output), without copying them into a string first; s is only read.
func appendJSONBytesAsString(b, s []byte) []byte {
	if len(s) == 0 {
		return append(b, `""`...)
	}
	return jsonstr.Append(b, unsafe.String(&s[0], len(s)))
}
