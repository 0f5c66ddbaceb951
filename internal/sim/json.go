package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
)

// orderKey is a hidden member of every decoded schema object that keeps the
// document's key order (a JSON Schema keyword or property name can never
// start with a NUL byte). Generated objects use Obj instead.
const orderKey = "\x00order"

// decodeOrdered decodes JSON into map[string]any (with orderKey), []any,
// string, float64, bool and nil.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			var order []string
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := m[k]; !dup {
					order = append(order, k)
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			m[orderKey] = order
			return m, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	default:
		return t, nil
	}
}

// keys lists a decoded schema object's members in document order.
func keys(m map[string]any) []string {
	if o, ok := m[orderKey].([]string); ok {
		out := make([]string, 0, len(o))
		for _, k := range o {
			if _, present := m[k]; present {
				out = append(out, k)
			}
		}
		if len(out) == len(m)-1 {
			return out
		}
		// Keys added after decoding (merges) come last, sorted.
		seen := map[string]bool{}
		for _, k := range out {
			seen[k] = true
		}
		var extra []string
		for k := range m {
			if k != orderKey && !seen[k] {
				extra = append(extra, k)
			}
		}
		slices.Sort(extra)
		return append(out, extra...)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		if k != orderKey {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Obj is a generated JSON object that keeps its key order.
type Obj struct {
	Keys []string
	M    map[string]any
}

func newObj() *Obj { return &Obj{M: map[string]any{}} }

// Set adds or replaces a member (a new member goes last).
func (o *Obj) Set(k string, v any) {
	if _, ok := o.M[k]; !ok {
		o.Keys = append(o.Keys, k)
	}
	o.M[k] = v
}

// Has reports whether the member exists.
func (o *Obj) Has(k string) bool { _, ok := o.M[k]; return ok }

// Delete removes a member.
func (o *Obj) Delete(k string) {
	if _, ok := o.M[k]; !ok {
		return
	}
	delete(o.M, k)
	o.Keys = slices.DeleteFunc(o.Keys, func(s string) bool { return s == k })
}

// MarshalJSON writes the members in order, without HTML escaping.
func (o *Obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, o); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// encodeJSON is v as compact JSON (keys in order, no HTML escaping).
func encodeJSON(v any) []byte {
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		panic(err) // generated values are always encodable
	}
	return b.Bytes()
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case *Obj:
		b.WriteByte('{')
		for i, k := range t.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeJSON(b, t.M[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range keys(t) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeJSON(b, t[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case string:
		writeString(b, t)
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return fmt.Errorf("non-finite number")
		}
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			b.WriteString(strconv.FormatInt(int64(t), 10))
			return nil
		}
		b.WriteString(strconv.FormatFloat(t, 'f', -1, 64))
	case json.Number:
		b.WriteString(t.String())
	default:
		raw, err := json.Marshal(t)
		if err != nil {
			return err
		}
		b.Write(raw)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}

// indentJSON pretty-prints compact JSON the way chat models usually do.
func indentJSON(compact []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		return compact
	}
	return b.Bytes()
}

// plain converts generated values (Obj) and decoded schema values (with
// orderKey) to plain encoding/json shapes, for validators.
func plain(v any) any {
	switch t := v.(type) {
	case *Obj:
		m := make(map[string]any, len(t.M))
		for k, e := range t.M {
			m[k] = plain(e)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			if k != orderKey {
				m[k] = plain(e)
			}
		}
		return m
	case []any:
		return mapArray(t, plain)
	case int:
		return float64(t)
	case int64:
		return float64(t)
	default:
		return v
	}
}

// fromSchemaValue turns a value taken from a schema (const, enum, default)
// into a generated value.
func fromSchemaValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		o := newObj()
		for _, k := range keys(t) {
			o.Set(k, fromSchemaValue(t[k]))
		}
		return o
	case []any:
		return mapArray(t, fromSchemaValue)
	default:
		return v
	}
}

// mapArray is a new array of f of each element of a.
func mapArray(a []any, f func(any) any) []any {
	out := make([]any, len(a))
	for i, e := range a {
		out[i] = f(e)
	}
	return out
}

// equalJSON compares two values as JSON values (numbers by value): plain
// has made both encoding/json shapes, with every number a float64, where
// reflect.DeepEqual is JSON equality (float64s compare with ==).
func equalJSON(a, b any) bool {
	return reflect.DeepEqual(plain(a), plain(b))
}
