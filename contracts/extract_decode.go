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
		return nil, parseViolation(RuleTopLevelNotObj, "the output is a JSON "+kindName(v)+", not an object")
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
	d := decoderPool.Get().(*decoder)
	// A *bytes.Buffer source lets jsontext parse b in place, without copying.
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf, decodeOpts)
	v, viol = d.run(base, maxDepth)
	n = int(d.dec.InputOffset())
	// Drop every reference into b and the decoded values before pooling.
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf, decodeOpts)
	decoderPool.Put(d)
	return v, n, viol
}

// Duplicate names are found with the maps we build anyway, which is cheaper
// than jsontext's own name tracking.
var decodeOpts = jsontext.AllowDuplicateNames(true)

var decoderPool = sync.Pool{New: func() any { return new(decoder) }}

type decoder struct {
	buf   bytes.Buffer
	dec   jsontext.Decoder
	stack []frame
}

// frame is one open container: obj is non-nil for objects, whose member name
// waits in name (named set) until its value is complete.
type frame struct {
	obj   map[string]any
	arr   []any
	name  string
	named bool
}

// run is an explicit-stack token loop, so depth costs heap, not goroutine
// stack, and the depth check comes before a container is entered.
func (d *decoder) run(base, maxDepth int) (any, *Violation) {
	st := d.stack[:0]
	defer func() { clear(st[:cap(st)]); d.stack = st[:0] }()
	for {
		tok, err := d.dec.ReadToken()
		if err != nil {
			return nil, syntaxViolation(err, base)
		}
		var v any
		switch tok.Kind() {
		case '{', '[':
			if len(st) >= maxDepth {
				return nil, parseViolation(RuleTooDeep, fmt.Sprintf("nesting deeper than %d levels at %s", maxDepth, framesPointer(st)))
			}
			if tok.Kind() == '{' {
				st = append(st, frame{obj: map[string]any{}})
			} else {
				st = append(st, frame{arr: []any{}}) // non-nil: [] stays [] when re-encoded
			}
			continue
		case '}':
			v = st[len(st)-1].obj
			st = st[:len(st)-1]
		case ']':
			v = st[len(st)-1].arr
			st = st[:len(st)-1]
		case '"':
			// jsontext enforces that names and values alternate, so in an
			// object without a pending name a string is the next name.
			s := tok.String()
			if top := len(st) - 1; top >= 0 && st[top].obj != nil && !st[top].named {
				st[top].name, st[top].named = s, true
				continue
			}
			v = s
		case '0':
			v = json.Number(tok.String())
		case 't':
			v = true
		case 'f':
			v = false
		case 'n':
			v = nil
		}
		if len(st) == 0 {
			return v, nil
		}
		top := &st[len(st)-1]
		if top.obj == nil {
			top.arr = append(top.arr, v)
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

// framesPointer is the JSON Pointer of the value being built in the innermost
// frame of st (of st's next child, to be exact).
func framesPointer(st []frame) string {
	var sb strings.Builder
	for i := range st {
		sb.WriteByte('/')
		if st[i].obj != nil {
			sb.WriteString(EscapePointerToken(st[i].name))
		} else {
			sb.WriteString(strconv.Itoa(len(st[i].arr)))
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

func kindName(v any) string {
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
