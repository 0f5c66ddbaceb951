package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeObject decodes b, which must hold exactly one JSON object (JSON
// whitespace around it allowed), into map[string]any / []any / string / bool
// / nil / json.Number. Duplicate names, invalid UTF-8, nesting deeper than
// maxDepth (0: DefaultMaxDepth) and trailing data are parse violations.
func decodeObject(b []byte, maxDepth int) (map[string]any, *Violation) {
	v, n, viol := decodeValue(b, 0, maxDepth)
	if viol != nil {
		return nil, viol
	}
	if !isWS(b[n:]) {
		return nil, parseViolation(RuleNotJSON, fmt.Sprintf("unexpected text after the JSON value at byte %d", n))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, parseViolation(RuleTopLevelNotObj, "the output is a JSON "+jsonKindName(v)+", not an object")
	}
	return m, nil
}

// decodeValue decodes the first JSON value in b (leading whitespace allowed)
// and returns it with the offset just past it; what follows is the caller's
// business. base is added to byte offsets in messages so they refer to the
// whole output rather than to the candidate slice.
func decodeValue(b []byte, base, maxDepth int) (v any, n int, viol *Violation) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	d := objDecoderPool.Get().(*objDecoder)
	// A *bytes.Buffer source lets jsontext parse b in place, without copying.
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf, decodeOpts)
	d.size = len(b)
	v, viol = d.run(base, maxDepth)
	n = int(d.dec.InputOffset())
	// Drop every reference into b and the decoded values before pooling.
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf, decodeOpts)
	objDecoderPool.Put(d)
	return v, n, viol
}

// Duplicate names are found with the maps we build anyway, which is cheaper
// than jsontext's own name tracking.
var decodeOpts = jsontext.AllowDuplicateNames(true)

var objDecoderPool = sync.Pool{New: func() any { return new(objDecoder) }}

type objDecoder struct {
	buf   bytes.Buffer
	dec   jsontext.Decoder
	stack []decodeFrame
	vals  []any
	arena []byte
	size  int // of the input, to size arena chunks
}

// decodeFrame is one open container. obj is non-nil for objects, whose member name
// waits in name (named set) until its value is complete. An array's n
// elements so far sit in the decoder's vals from start, so that each array
// is allocated once, at its exact size.
type decodeFrame struct {
	obj      map[string]any
	start, n int
	name     string
	named    bool
}

// run is an explicit-stack token loop, so depth costs heap, not goroutine
// stack, and the depth check comes before a container is entered.
func (d *objDecoder) run(base, maxDepth int) (any, *Violation) {
	st := d.stack[:0]
	d.arena = nil
	defer func() {
		// Popped frames linger past len(st); vals is cleared as it shrinks.
		clear(st[:cap(st)])
		clear(d.vals)
		d.stack, d.vals, d.arena = st[:0], d.vals[:0], nil
		if cap(st) > 1024 || cap(d.vals) > 1<<16 { // not worth pooling
			d.stack, d.vals = nil, nil
		}
	}()
	for {
		var v any
		switch k := d.dec.PeekKind(); k {
		case '"', '0':
			// Read raw and copied into an arena: one allocation for all
			// strings and numbers instead of one each.
			raw, err := d.dec.ReadValue()
			if err != nil {
				return nil, syntaxViolation(err, base)
			}
			if k == '0' {
				v = json.Number(d.str(raw, false))
				break
			}
			s := d.str(raw, true)
			// jsontext enforces that names and values alternate, so in an
			// object without a pending name a string is the next name.
			if top := len(st) - 1; top >= 0 && st[top].obj != nil && !st[top].named {
				st[top].name, st[top].named = s, true
				continue
			}
			v = s
		default:
			tok, err := d.dec.ReadToken()
			if err != nil {
				return nil, syntaxViolation(err, base)
			}
			switch tok.Kind() {
			case '{', '[':
				if len(st) >= maxDepth {
					return nil, parseViolation(RuleTooDeep, fmt.Sprintf("nesting deeper than %d levels at %s", maxDepth, framesPointer(st)))
				}
				if tok.Kind() == '{' {
					st = append(st, decodeFrame{obj: map[string]any{}})
				} else {
					st = append(st, decodeFrame{start: len(d.vals)})
				}
				continue
			case '}':
				v = st[len(st)-1].obj
				st = st[:len(st)-1]
			case ']':
				f := st[len(st)-1]
				a := make([]any, f.n) // non-nil even when empty: [] stays []
				copy(a, d.vals[f.start:])
				clear(d.vals[f.start:])
				d.vals = d.vals[:f.start]
				v = a
				st = st[:len(st)-1]
			case 't':
				v = true
			case 'f':
				v = false
			}
		}
		if len(st) == 0 {
			return v, nil
		}
		top := &st[len(st)-1]
		if top.obj == nil {
			d.vals = append(d.vals, v)
			top.n++
			continue
		}
		top.named = false
		// One hash operation both inserts and detects a repeated name.
		n := len(top.obj)
		top.obj[top.name] = v
		if len(top.obj) == n {
			ptr := framesPointer(st[:len(st)-1]) + "/" + EscapePointerToken(top.name)
			return nil, parseViolation(RuleDuplicateKey, fmt.Sprintf("duplicate key %s at %s", strconv.Quote(top.name), ptr))
		}
	}
}

// str copies a raw number, or a raw string unquoted, into the arena. The
// arena is fresh per decode and never written twice, so strings may alias it.
func (d *objDecoder) str(raw []byte, quoted bool) string {
	n := len(raw) // unquoting never lengthens
	if cap(d.arena)-len(d.arena) < n {
		d.arena = make([]byte, 0, max(n, min(d.size, 32<<10)))
	}
	start := len(d.arena)
	if quoted {
		// raw was validated by ReadValue, so this cannot fail.
		d.arena, _ = jsontext.AppendUnquote(d.arena, raw)
	} else {
		d.arena = append(d.arena, raw...)
	}
	if len(d.arena) == start {
		return ""
	}
	return unsafe.String(&d.arena[start], len(d.arena)-start)
}

// framesPointer is the JSON Pointer of the value being built in the innermost
// decodeFrame of st (of st's next child, to be exact).
func framesPointer(st []decodeFrame) string {
	var sb strings.Builder
	for i := range st {
		sb.WriteByte('/')
		if st[i].obj != nil {
			sb.WriteString(EscapePointerToken(st[i].name))
		} else {
			sb.WriteString(strconv.Itoa(st[i].n))
		}
	}
	return sb.String()
}

// syntaxViolation maps a jsontext error to a parse rule; jsontext's own error
// values for these cases are internal, so its messages are matched.
func syntaxViolation(err error, base int) *Violation {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return parseViolation(RuleNotJSON, "invalid JSON: unexpected end of input")
	}
	var serr *jsontext.SyntacticError
	if !errors.As(err, &serr) || serr.Err == nil {
		return parseViolation(RuleNotJSON, "invalid JSON: "+err.Error())
	}
	rule := RuleNotJSON
	switch msg := serr.Err.Error(); {
	case strings.Contains(msg, "invalid UTF-8"), strings.Contains(msg, "surrogate"):
		rule = RuleInvalidUTF8
	case strings.Contains(msg, "exceeded max depth"):
		rule = RuleTooDeep
	}
	return parseViolation(rule, fmt.Sprintf("invalid JSON at byte %d: %v", int64(base)+serr.ByteOffset, serr.Err))
}

func parseViolation(rule, msg string) *Violation {
	return &Violation{Kind: KindParse, Path: "", Rule: rule, Message: msg}
}

func jsonKindName(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "object"
}
