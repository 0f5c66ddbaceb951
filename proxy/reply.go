package proxy

import (
	"strconv"
	"sync"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	openai "github.com/sashabaranov/go-openai"

	"github.com/contractd/contractd/internal/jsonscan"
	"github.com/contractd/contractd/internal/jsonstr"
)

// The upstream reply is read with one token walk into the fields the
// pipeline uses; it reads exactly what json v2 unmarshalling into the
// fields' struct with wireOptions reads (FuzzReadCompletionAgrees holds it
// to that): a member of the wrong type fails the reply, null is the zero
// value, a repeated member is read again over the first (objects merge,
// arrays start over), unknown members are skipped. Without reflection it
// costs a third of the allocations, and every string it keeps shares one
// buffer.

// wireOptions: like encoding/json, invalid UTF-8 in strings becomes U+FFFD
// rather than failing the reply, and duplicate names are tolerated. The
// walk's scanner accepts what jsontext accepts with these options
// (jsonscan.FuzzScanAgrees), reading the reply in place.
var wireOptions = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// replyReader is the pooled state of one read.
type replyReader struct {
	dec  jsonscan.Scanner
	strs [numStrs][]byte // raw, until the walk ends; nil: absent or null
	// The content's value when the scanner unquoted it as it read it
	// (jsonscan.AppendString), for the literal contentRaw; whether that
	// literal is what jsonstr.Append writes.
	content, contentRaw []byte
	contentSame         bool
}

// maxPooledContent bounds the content buffer a pooled reader keeps.
const maxPooledContent = 64 << 10

// The strings a reply keeps.
const (
	strID = iota
	strObject
	strModel
	strFingerprint
	strRole
	strContent
	strRefusal
	strFinish
	numStrs
	strDrop = -1 // a string of a later choice: checked, not kept
)

var replyReaderPool = sync.Pool{New: func() any { return new(replyReader) }}

// errReply ends a walk on a reply json v2 would not unmarshal.
type errReply struct{}

// readCompletion reads a reply. The completion's strings are its own;
// its quoted literal (if any) is a slice of data, which must stay as it is
// for as long as the completion's quoted is used (Completion.release).
func readCompletion(data []byte) (*Completion, bool) {
	r := replyReaderPool.Get().(*replyReader)
	r.dec.Reset(data, true) // AllowInvalidUTF8, as wireOptions
	var (
		created, choices int64
		usage            openai.Usage
		s                [numStrs]string
		quoted           []byte
	)
	ok := r.reply(&created, &choices, &usage)
	if ok {
		quoted = r.unquote(&s)
	}
	r.strs = [numStrs][]byte{}
	r.contentRaw = nil
	if cap(r.content) > maxPooledContent {
		r.content = nil
	}
	r.dec.Reset(nil, true)
	replyReaderPool.Put(r)
	if !ok || choices == 0 || s[strObject] == "chat.completion.chunk" {
		return nil, false
	}
	c := &Completion{Output: s[strContent], Refusal: s[strRefusal], Finish: s[strFinish], quoted: quoted}
	c.choice[0] = openai.ChatCompletionChoice{Message: openai.ChatCompletionMessage{Role: s[strRole],
		Content: c.Output, Refusal: c.Refusal}, FinishReason: openai.FinishReason(c.Finish)}
	c.Resp = openai.ChatCompletionResponse{ID: s[strID], Object: s[strObject], Created: created, Model: s[strModel],
		SystemFingerprint: s[strFingerprint], Choices: c.choice[:], Usage: usage}
	return c, true
}

// reply reads the whole input: one value (an object, or null) and nothing
// after it.
func (r *replyReader) reply(created, choices *int64, usage *openai.Usage) (ok bool) {
	defer func() {
		if e := recover(); e != nil {
			if _, is := e.(errReply); !is {
				panic(e)
			}
			ok = false
		}
	}()
	r.object(func(name []byte) {
		switch string(name) {
		case "id":
			r.str(strID)
		case "object":
			r.str(strObject)
		case "model":
			r.str(strModel)
		case "system_fingerprint":
			r.str(strFingerprint)
		case "created":
			*created = r.int()
		case "choices":
			*choices = r.choices()
		case "usage":
			if r.null() {
				*usage = openai.Usage{}
				return
			}
			// A repeated usage object merges into the first.
			r.object(func(name []byte) {
				switch string(name) {
				case "prompt_tokens":
					usage.PromptTokens = int(r.int())
				case "completion_tokens":
					usage.CompletionTokens = int(r.int())
				case "total_tokens":
					usage.TotalTokens = int(r.int())
				default:
					r.skip()
				}
			})
		default:
			r.skip()
		}
	})
	if !r.dec.Done() {
		panic(errReply{})
	}
	return true
}

// choices reads the choices array and returns its length; only the first
// element is kept, the others must still have the right types. A repeated
// choices member replaces the first.
func (r *replyReader) choices() int64 {
	r.strs[strRole], r.strs[strContent], r.strs[strRefusal], r.strs[strFinish] = nil, nil, nil, nil
	if r.null() {
		return 0
	}
	r.expect('[')
	n := int64(0)
	for r.dec.PeekKind() != ']' {
		r.choice(n == 0)
		n++
	}
	r.expect(']')
	return n
}

// choice reads one element of choices, keeping its strings if keep.
func (r *replyReader) choice(keep bool) {
	slot := func(i int) int {
		if keep {
			return i
		}
		return strDrop
	}
	r.object(func(name []byte) {
		switch string(name) {
		case "message":
			if r.null() {
				if keep {
					r.strs[strRole], r.strs[strContent], r.strs[strRefusal] = nil, nil, nil
				}
				return
			}
			r.object(func(name []byte) {
				switch string(name) {
				case "role":
					r.str(slot(strRole))
				case "content":
					r.str(slot(strContent))
				case "refusal":
					r.str(slot(strRefusal))
				default:
					r.skip()
				}
			})
		case "finish_reason":
			r.str(slot(strFinish))
		default:
			r.skip()
		}
	})
}

// object reads an object, calling member with each name for it to read the
// value; null, like json v2 into a struct that is no pointer's, reads
// nothing.
func (r *replyReader) object(member func(name []byte)) {
	if r.null() {
		return
	}
	r.expect('{')
	for r.dec.PeekKind() != '}' {
		raw, err := r.dec.ReadValue()
		if err != nil {
			panic(errReply{})
		}
		name := raw[1 : len(raw)-1]
		if !plainName(name) {
			name, _ = jsontext.AppendUnquote(nil, raw) // rare: escapes or non-ASCII
		}
		member(name)
	}
	r.expect('}')
}

// plainName: a name of ASCII without escapes is its own text.
func plainName(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

// null reads a null if one comes next.
func (r *replyReader) null() bool {
	if r.dec.PeekKind() != 'n' {
		return false
	}
	if _, err := r.dec.ReadToken(); err != nil {
		panic(errReply{})
	}
	return true
}

// expect reads a delimiter token of kind k.
func (r *replyReader) expect(k jsonscan.Kind) {
	if r.dec.PeekKind() != k {
		panic(errReply{})
	}
	if _, err := r.dec.ReadToken(); err != nil {
		panic(errReply{})
	}
}

func (r *replyReader) skip() {
	if err := r.dec.SkipValue(); err != nil {
		panic(errReply{})
	}
}

// str reads a string or null (absent, "") into slot i. The text is
// unquoted when the walk ends.
func (r *replyReader) str(i int) {
	var raw []byte
	if !r.null() {
		if r.dec.PeekKind() != '"' {
			panic(errReply{})
		}
		if i == strContent {
			// Usually unquoted as it is read: one pass, not two.
			var ok bool
			if r.content, raw, r.contentSame, ok = r.dec.AppendString(r.content[:0]); ok {
				r.strs[i], r.contentRaw = raw, raw
				return
			}
		}
		var err error
		if raw, err = r.dec.ReadValue(); err != nil {
			panic(errReply{})
		}
	}
	if i != strDrop {
		r.strs[i] = raw
	}
}

// int reads an integer or null (0) as json v2 reads it into an int64:
// digits only, no fraction or exponent, within range.
func (r *replyReader) int() int64 {
	if r.null() {
		return 0
	}
	if r.dec.PeekKind() != '0' {
		panic(errReply{})
	}
	raw, err := r.dec.ReadValue()
	if err != nil {
		panic(errReply{})
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			panic(errReply{})
		}
	}
	n, err := strconv.ParseInt(unsafe.String(unsafe.SliceData(raw), len(raw)), 10, 64)
	if err != nil {
		panic(errReply{})
	}
	return n
}

// unquote sets s to the kept strings, all unquoted into one buffer which
// they then share. It returns the content's raw string literal, a slice of
// the reply (not a copy: the caller keeps the reply until the answer is
// written), when it is exactly what jsonstr.Append writes for the content
// (Completion.quoted); nil otherwise.
func (r *replyReader) unquote(s *[numStrs]string) (quoted []byte) {
	n := 0
	for _, raw := range r.strs {
		n += len(raw)
	}
	if n == 0 {
		return nil
	}
	// Room for every string unquoted (never longer than raw, but for
	// invalid UTF-8).
	buf := make([]byte, 0, n)
	var ends [numStrs]int
	same := false
	for i, raw := range r.strs {
		if raw != nil {
			// Invalid UTF-8 becomes U+FFFD (and may lengthen the text),
			// as json v2 reads it with AllowInvalidUTF8.
			switch {
			case i == strContent && len(raw) > 0 && unsafe.SliceData(raw) == unsafe.SliceData(r.contentRaw):
				buf, same = append(buf, r.content...), r.contentSame // unquoted as read
			case i == strContent:
				buf, same = jsonstr.AppendUnquoteSame(buf, raw) // raw was read by the decoder
			default:
				buf = jsonstr.AppendUnquote(buf, raw)
			}
		}
		ends[i] = len(buf)
	}
	start := 0
	for i, end := range ends {
		if end > start {
			s[i] = unsafe.String(&buf[start], end-start)
		}
		start = end
	}
	if same {
		raw := r.strs[strContent]
		quoted = raw[:len(raw):len(raw)]
	}
	return quoted
}
