package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unsafe"

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

var errNotObject = errors.New("request body must be a JSON object")

// parseObject splits a JSON object into its members. Duplicate names and
// invalid UTF-8 are errors (jsontext's defaults), as is trailing data.
// Member names and values alias b (jsontext decodes a bytes.Buffer in
// place): b must outlive the object and not change.
func parseObject(b []byte) (object, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(b))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, errNotObject
	}
	var obj object
	for dec.PeekKind() != '}' {
		from := dec.InputOffset()
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // the token is void after the next read
		// Between the previous value and the end of the name there is only
		// whitespace, a comma, and the quoted name itself.
		var raw []byte // nil: apply re-quotes Name
		if span := b[from:dec.InputOffset()]; bytes.IndexByte(span, '"') >= 0 {
			raw = span[bytes.IndexByte(span, '"'):]
		}
		val, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		obj = append(obj, member{Name: name, Value: within(val, b), rawName: within(raw, b)})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	// Only io.EOF means the object was all there was. Any other result is
	// trailing data: a token ({}{}) or bytes that are not JSON at all
	// ({} x, {}]), which ReadToken reports as a syntax error; accepting the
	// latter let malformed bodies through as valid JSON.
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return obj, nil
}

// within returns v when it is a slice of b (the decoder's values alias its
// bytes.Buffer), else a copy of it: a value valid only until the decoder's
// next read must not be kept.
func within(v, b []byte) []byte {
	if len(v) == 0 || len(b) == 0 {
		return bytes.Clone(v)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	if p >= start && p+uintptr(len(v)) <= start+uintptr(len(b)) {
		return v[:len(v):len(v)]
	}
	return bytes.Clone(v)
}

// parseArray splits a JSON array into its elements, aliasing b as
// parseObject does.
func parseArray(b []byte) ([]jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(b))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '[' {
		return nil, errors.New("not a JSON array")
	}
	var out []jsontext.Value
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		out = append(out, within(v, b))
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON array")
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
// delete (Value nil).
type edit struct {
	Name  string
	Value []byte // nil: delete
}

// apply rewrites o with edits: replaced members keep their position, new
// ones are appended in edit order, every other member is copied byte for
// byte, its name as the client spelled it (escapes kept).
func (o object) apply(edits []edit) []byte {
	var b bytes.Buffer
	b.Grow(o.sizeAfter(edits))
	b.WriteByte('{')
	done := make([]bool, len(edits))
	first := true
	write := func(name string, rawName, val []byte) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		if rawName != nil {
			b.Write(rawName)
		} else {
			writeString(&b, name)
		}
		b.WriteByte(':')
		b.Write(val)
	}
outer:
	for _, m := range o {
		for i, e := range edits {
			if e.Name == m.Name {
				if !done[i] && e.Value != nil {
					write(m.Name, m.rawName, e.Value)
				}
				done[i] = true
				continue outer
			}
		}
		write(m.Name, m.rawName, m.Value)
	}
	for i, e := range edits {
		if !done[i] && e.Value != nil {
			write(e.Name, nil, e.Value)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// sizeAfter is the size of o with edits applied (give or take the
// punctuation of added members): the output buffer is allocated once, not
// grown by doubling around a large member.
func (o object) sizeAfter(edits []edit) int {
	n := o.size() + 16
	for _, e := range edits {
		n += len(e.Name) + len(e.Value) + 4
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

func writeString(b *bytes.Buffer, s string) {
	v, err := jsontext.AppendQuote(nil, s)
	if err != nil { // invalid UTF-8 cannot come from parsed input
		v, _ = json.Marshal(s)
	}
	b.Write(v)
}

// quoteJSON is mustJSON for a string, in a buffer sized once: a large
// message is not re-copied as the buffer grows.
func quoteJSON(s string) []byte {
	var b bytes.Buffer
	b.Grow(len(s) + len(s)/8 + 16)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
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
