package proxy

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// member is one top-level member of a JSON object, kept as the client
// wrote it so forwarding preserves number spellings, escapes and order.
type member struct {
	Name  string
	Value jsontext.Value
}

// object is a JSON object as an ordered member list.
type object []member

var errNotObject = errors.New("request body must be a JSON object")

// parseObject splits a JSON object into its members. Duplicate names and
// invalid UTF-8 are errors (jsontext's defaults), as is trailing data.
func parseObject(b []byte) (object, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, errNotObject
	}
	var obj object
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // the token is void after the next read
		val, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		obj = append(obj, member{Name: name, Value: bytes.Clone(val)})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err == nil {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return obj, nil
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
// ones are appended in edit order, every other member is copied byte for byte.
func (o object) apply(edits []edit) []byte {
	var b bytes.Buffer
	b.Grow(o.size() + 256)
	b.WriteByte('{')
	done := make([]bool, len(edits))
	first := true
	write := func(name string, val []byte) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeString(&b, name)
		b.WriteByte(':')
		b.Write(val)
	}
outer:
	for _, m := range o {
		for i, e := range edits {
			if e.Name == m.Name {
				if !done[i] && e.Value != nil {
					write(m.Name, e.Value)
				}
				done[i] = true
				continue outer
			}
		}
		write(m.Name, m.Value)
	}
	for i, e := range edits {
		if !done[i] && e.Value != nil {
			write(e.Name, e.Value)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (o object) size() int {
	n := 2
	for _, m := range o {
		n += len(m.Name) + len(m.Value) + 4
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

func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only called with values we built
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}
