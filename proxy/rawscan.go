package proxy

import (
	"bytes"
	"sync"
	"unsafe"

	"github.com/contractd/contractd/internal/jsonscan"
)

// scanObjectMax is how many members an object may have for scanObject's
// duplicate check (a name against each before it); a larger object goes
// to jsontext, whose check does not grow with the square.
const scanObjectMax = 32

// objectScanner is a pooled jsonscan.Scanner with the member names of the
// objects open on its path, for the duplicate check.
type objectScanner struct {
	s     jsonscan.Scanner
	names [][]byte
}

var objectScanners = sync.Pool{New: func() any { return new(objectScanner) }}

// scanObject is appendObject's fast path: the same members, read with
// jsonscan (which accepts exactly what jsontext does, duplicate names
// aside) instead of jsontext's Decoder. It reports false whenever it
// cannot be sure to agree: the body is not accepted, a name anywhere has
// an escape (jsontext compares names unquoted), two names of one object
// are the same, or an object has more than scanObjectMax members. The
// jsontext path then decides, and words any error. FuzzScanObjectAgrees
// holds the two paths to the same members.
func scanObject(obj object, b []byte) (object, bool) {
	o := objectScanners.Get().(*objectScanner)
	defer func() {
		o.s.Reset(nil, false)
		clear(o.names)
		o.names = o.names[:0]
		objectScanners.Put(o)
	}()
	s := &o.s
	s.Reset(b, false)
	if k, err := s.ReadToken(); err != nil || k != '{' {
		return nil, false
	}
	first := len(obj)
	for {
		switch s.PeekKind() {
		case '}':
			if _, err := s.ReadToken(); err != nil || !s.Done() {
				return nil, false
			}
			return obj, true
		case '"':
		default:
			return nil, false
		}
		q, err := s.ReadValue()
		if err != nil || bytes.IndexByte(q, '\\') >= 0 || len(obj)-first >= scanObjectMax {
			return nil, false
		}
		name := q[1 : len(q)-1]
		for _, m := range obj[first:] {
			if m.Name == string(name) {
				return nil, false
			}
		}
		from := s.InputOffset()
		if !o.value() {
			return nil, false
		}
		v := b[from:s.InputOffset()]
		for len(v) > 0 && (v[0] == ':' || v[0] == ' ' || v[0] == '\t' || v[0] == '\n' || v[0] == '\r') {
			v = v[1:] // the separator and whitespace before the value
		}
		m := member{Value: v[:len(v):len(v)], rawName: q[:len(q):len(q)]}
		if len(name) > 0 {
			m.Name = unsafe.String(unsafe.SliceData(name), len(name))
		}
		obj = append(obj, m)
	}
}

// value reads the next value, checking every object in it for duplicate
// or escaped names as scanObject does at the top.
func (o *objectScanner) value() bool {
	s := &o.s
	switch s.PeekKind() {
	case '{':
		if _, err := s.ReadToken(); err != nil {
			return false
		}
		first := len(o.names)
		for {
			switch s.PeekKind() {
			case '}':
				_, err := s.ReadToken()
				clear(o.names[first:])
				o.names = o.names[:first]
				return err == nil
			case '"':
			default:
				return false
			}
			q, err := s.ReadValue()
			if err != nil || bytes.IndexByte(q, '\\') >= 0 || len(o.names)-first >= scanObjectMax {
				return false
			}
			for _, n := range o.names[first:] {
				if bytes.Equal(n, q) {
					return false
				}
			}
			o.names = append(o.names, q)
			if !o.value() {
				return false
			}
		}
	case '[':
		if _, err := s.ReadToken(); err != nil {
			return false
		}
		for s.PeekKind() != ']' {
			if !o.value() {
				return false
			}
		}
		_, err := s.ReadToken()
		return err == nil
	case '}', ']', 0:
		return false
	}
	_, err := s.ReadToken()
	return err == nil
}
