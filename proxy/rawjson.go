package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/contractd/contractd/internal/jsonstr"
	"github.com/go-json-experiment/json/jsontext"
)

// member is one top-level member of a JSON object, kept as the client
// wrote it so forwarding preserves number spellings, escapes and order.
type member struct {
	Name    string
	Value   jsontext.Value
	rawName []byte // the name as the client quoted it (escapes kept)
}

// object is a JSON object as an ordered member list.
type object []member

var (
	errNotObject = errors.New("request body must be a JSON object")
	errNotArray  = errors.New("not a JSON array")
)

// parseObject splits a JSON object into its members. Duplicate names and
// invalid UTF-8 are errors (jsontext's defaults), as is trailing data.
// Member names and values alias b (jsontext decodes a bytes.Buffer in
// place): b must outlive the object and not change.
func parseObject(b []byte) (object, error) { return appendObject(make(object, 0, 8), b) }

// appendObject is parseObject appending the members to obj, so a caller
// reading many small objects reuses one slice.
func appendObject(obj object, b []byte) (object, error) {
	if out, ok := scanObject(obj, b); ok {
		return out, nil
	}
	return decodeObject(obj, b)
}

// decodeObject is appendObject through jsontext's Decoder: every body
// scanObject leaves to it, and the wording of every error.
func decodeObject(obj object, b []byte) (object, error) {
	d := getDecoder(b)
	defer d.release()
	dec := &d.dec
	if err := d.enter('{', errNotObject); err != nil {
		return nil, err
	}
	for dec.PeekKind() != '}' {
		from := dec.InputOffset()
		// The name is read raw: it is a slice of b, and its unquoted form
		// (when it has escapes) a copy.
		qname, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		// Between the previous value and the end of the name there is only
		// whitespace, a comma, and the quoted name itself.
		var raw []byte // nil: apply re-quotes Name
		if span := b[from:dec.InputOffset()]; bytes.IndexByte(span, '"') >= 0 {
			raw = within(span[bytes.IndexByte(span, '"'):], b)
		}
		val, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		obj = append(obj, member{Name: nameOf(qname, b), Value: within(val, b), rawName: raw})
	}
	if err := d.leave("unexpected data after the JSON object"); err != nil {
		return nil, err
	}
	return obj, nil
}

// nameOf is the unquoted member name q (valid, as the decoder read it). A
// name without escapes is its bytes in b, shared like the member's value
// rather than copied; one with escapes is unquoted into a string of its own.
func nameOf(q, b []byte) string {
	in := q[1 : len(q)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		if len(in) > 0 && inside(in, b) {
			return unsafe.String(unsafe.SliceData(in), len(in))
		}
		return string(in)
	}
	u, _ := jsontext.AppendUnquote(nil, q) // q was validated by ReadValue
	return string(u)
}

// rawDecoder is a pooled jsontext decoder: a fresh one allocates its
// buffers and, per object, its duplicate-name tracking, which Reset keeps.
type rawDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var rawDecoders = sync.Pool{New: func() any { return new(rawDecoder) }}

// getDecoder returns a decoder of b with jsontext's default options
// (duplicate names and invalid UTF-8 rejected), reading b in place.
func getDecoder(b []byte) *rawDecoder {
	d := rawDecoders.Get().(*rawDecoder)
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf)
	return d
}

// enter reads the token that opens the container b must be (kind).
func (d *rawDecoder) enter(kind jsontext.Kind, notKind error) error {
	tok, err := d.dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != kind {
		return notKind
	}
	return nil
}

// leave reads the token that closes the container, then the end of b.
// Only io.EOF means the container was all there was. Any other result is
// trailing data: a token ({}{}) or bytes that are not JSON at all ({} x,
// {}]), which ReadToken reports as a syntax error; accepting the latter
// let malformed bodies through as valid JSON.
func (d *rawDecoder) leave(trailing string) error {
	if _, err := d.dec.ReadToken(); err != nil {
		return err
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return errors.New(trailing)
	}
	return nil
}

// release drops every reference into the decoded bytes and pools d.
func (d *rawDecoder) release() {
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf)
	rawDecoders.Put(d)
}

// within returns v when it is a slice of b (the decoder's values alias its
// bytes.Buffer), else a copy of it: a value valid only until the decoder's
// next read must not be kept.
func within(v, b []byte) []byte {
	if len(v) > 0 && inside(v, b) {
		return v[:len(v):len(v)]
	}
	return bytes.Clone(v)
}

// inside reports whether the non-empty v is a slice of b.
func inside(v, b []byte) bool {
	if len(b) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	return p >= start && p+uintptr(len(v)) <= start+uintptr(len(b))
}

// parseArray splits a JSON array into its elements, aliasing b as
// parseObject does.
func parseArray(b []byte) ([]jsontext.Value, error) {
	d := getDecoder(b)
	defer d.release()
	dec := &d.dec
	if err := d.enter('[', errNotArray); err != nil {
		return nil, err
	}
	var out []jsontext.Value
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		out = append(out, within(v, b))
	}
	if err := d.leave("unexpected data after the JSON array"); err != nil {
		return nil, err
	}
	return out, nil
}

func (o object) get(name string) (jsontext.Value, bool) {
	for _, m := range o {
		if m.Name == name {
			return m.Value, true
		}
	}
	return nil, false
}

// edit is a change to an object: set (replace in place, or append) or
// delete (Value and Fill nil).
type edit struct {
	Name  string
	Value []byte
	// Fill, when set, appends the value in place of Value: a large value
	// (the messages) is written once, straight into the output, rather
	// than built apart and copied. Size is its length, to size the output.
	Fill func(b []byte) []byte
	Size int
}

func (e *edit) set() bool { return e.Value != nil || e.Fill != nil }

// apply rewrites o with edits: replaced members keep their position, new
// ones are appended in edit order, every other member is copied byte for
// byte, its name as the client spelled it (escapes kept).
func (o object) apply(edits []edit) []byte { return o.applyTo(nil, edits) }

// applyTo is apply writing into dst's memory (grown if too small).
func (o object) applyTo(dst []byte, edits []edit) []byte {
	b := slices.Grow(dst[:0], o.sizeAfter(edits))
	b = append(b, '{')
	var doneBuf [16]bool // on the stack for the usual few edits
	done := doneBuf[:]
	if len(edits) > len(done) {
		done = make([]bool, len(edits))
	}
	done = done[:len(edits)]
	first := true
	name := func(name string, rawName []byte) {
		if !first {
			b = append(b, ',')
		}
		first = false
		if rawName != nil {
			b = append(b, rawName...)
		} else {
			b = appendString(b, name)
		}
		b = append(b, ':')
	}
	value := func(e *edit) {
		if e.Fill != nil {
			b = e.Fill(b)
		} else {
			b = append(b, e.Value...)
		}
	}
outer:
	for _, m := range o {
		for i := range edits {
			if e := &edits[i]; e.Name == m.Name {
				if !done[i] && e.set() {
					name(m.Name, m.rawName)
					value(e)
				}
				done[i] = true
				continue outer
			}
		}
		name(m.Name, m.rawName)
		b = append(b, m.Value...)
	}
	for i := range edits {
		if e := &edits[i]; !done[i] && e.set() {
			name(e.Name, nil)
			value(e)
		}
	}
	return append(b, '}')
}

// sizeAfter is the size of o with edits applied (give or take the
// punctuation of added members): the output buffer is allocated once, not
// grown by doubling around a large member.
func (o object) sizeAfter(edits []edit) int {
	n := o.size() + 16
	for _, e := range edits {
		n += len(e.Name) + len(e.Value) + e.Size + 4
		if v, ok := o.get(e.Name); ok {
			n -= len(v)
		}
	}
	return n
}

func (o object) size() int {
	n := 2
	for _, m := range o {
		n += len(m.rawName) + len(m.Value) + 2
	}
	return n
}

func writeString(b *bytes.Buffer, s string) { b.Write(appendString(nil, s)) }

// appendString appends s quoted as JSON.
func appendString(b []byte, s string) []byte {
	v, err := jsontext.AppendQuote(b, s)
	if err != nil { // invalid UTF-8 cannot come from parsed input
		// A copy for json's any, so that s itself never escapes: the
		// callers' edits and their values stay on their stacks.
		m, _ := json.Marshal(strings.Clone(s))
		return append(b, m...)
	}
	return v
}

// quoteJSON is mustJSON for a string, in a buffer sized once: a large
// message is not re-copied as the buffer grows.
func quoteJSON(s string) []byte {
	return jsonstr.Append(make([]byte, 0, len(s)+len(s)/8+16), s)
}

func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only called with values we built
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// roleValue is stringValue for a message's role: the roles of the API
// are the same strings every time, not copies.
func roleValue(v []byte) string {
	switch string(v) {
	case `"user"`:
		return "user"
	case `"assistant"`:
		return "assistant"
	case `"system"`:
		return "system"
	case `"developer"`:
		return "developer"
	case `"tool"`:
		return "tool"
	}
	return stringValue(v)
}

// stringValue is unquoteJSON for a string value v that was parsed (so
// valid): one without escapes is copied as it is (the string outlives the
// body's buffer), without encoding/json's reflection.
func stringValue(v []byte) string {
	if in := v[1 : len(v)-1]; bytes.IndexByte(in, '\\') < 0 {
		return string(in)
	}
	return unquoteJSON(v)
}

// splitArray and splitObject are parseArray and appendObject for bytes
// jsontext has already validated: a member of an object parseObject
// returned, at any depth (parseObject checks the whole body: syntax,
// UTF-8, duplicate names). They only find where each element, name and
// value ends, strings at memchr speed, so a large message is not decoded
// twice more. Their results are parseArray's and appendObject's; on bytes
// that are not valid JSON they may fail (false) or split wrongly, but
// never panic.
func splitArray(out []jsontext.Value, b []byte) ([]jsontext.Value, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
		return out, skipSpace(b, i+1) == len(b)
	}
	for {
		e := endOfValue(b, i)
		if e < 0 {
			return nil, false
		}
		out = append(out, jsontext.Value(b[i:e:e]))
		if i = skipSpace(b, e); i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return out, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// splitObject: see splitArray.
func splitObject(obj object, b []byte) (object, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return obj, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		ne := endOfString(b, i)
		if ne < 0 {
			return nil, false
		}
		qname := b[i:ne:ne]
		if i = skipSpace(b, ne); i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		e := endOfValue(b, i)
		if e < 0 {
			return nil, false
		}
		obj = append(obj, member{Name: nameOf(qname, b), Value: b[i:e:e], rawName: qname})
		if i = skipSpace(b, e); i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return obj, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endOfString is the index just past the string that opens at b[i], or -1.
func endOfString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// Escaped when an odd run of backslashes precedes it. Each run is
		// counted once: it ends at the quote before it at the latest.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
	}
	return -1
}

// endOfValue is the index just past the value that starts at b[i], or -1.
func endOfValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = endOfString(b, j); j < 0 {
					return -1
				}
				j-- // the loop steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	// A number or a literal runs to the next delimiter.
	j := i
	for j < len(b) && !delimiter(b[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

func delimiter(c byte) bool {
	switch c {
	case ',', ']', '}', ':', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// quotedAsIs reports whether in, the inside of a valid JSON string with no
// backslash, is exactly how quoteJSON writes its text: it then needs no
// requoting. Control characters, quotes and invalid UTF-8 cannot be in
// it; only U+2028 and U+2029, which quoteJSON escapes, can.
func quotedAsIs(in []byte) bool {
	for i := 0; ; i++ {
		k := bytes.IndexByte(in[i:], 0xE2)
		if k < 0 {
			return true
		}
		i += k
		if i+2 < len(in) && in[i+1] == 0x80 && (in[i+2] == 0xA8 || in[i+2] == 0xA9) {
			return false
		}
	}
}
