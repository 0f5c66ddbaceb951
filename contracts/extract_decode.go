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

	"github.com/contractd/contractd/internal/jsonscan"
	"github.com/contractd/contractd/internal/jsonstr"
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
	return decodeValueInto(b, base, maxDepth, nil)
}

// decodeValueInto is decodeValue building the value's containers, strings
// and boxes from sc (nil: fresh ones), see decodeScratch.
func decodeValueInto(b []byte, base, maxDepth int, sc *decodeScratch) (v any, n int, viol *Violation) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	d := acquireDecoder(b, sc)
	v, viol = d.run(base, maxDepth)
	n = int(d.dec.InputOffset())
	d.release()
	return v, n, viol
}

// acquireDecoder takes a pooled decoder over b, building from sc (nil:
// fresh values). A *bytes.Buffer source lets jsontext parse b in place,
// without copying.
func acquireDecoder(b []byte, sc *decodeScratch) *objDecoder {
	d := acquireScanning(sc)
	d.buf = *bytes.NewBuffer(b)
	d.resetDec()
	d.size = len(b)
	return d
}

// acquireScanning takes a pooled decoder for the one-pass check, which
// reads with its scanner and uses the jsontext decoder only for a value
// it decodes whole (buildOne, which resets it then): a pooled decoder's
// jsontext decoder already reads an empty buffer, so it is not reset here.
func acquireScanning(sc *decodeScratch) *objDecoder {
	d := objDecoderPool.Get().(*objDecoder)
	d.sc = sc
	return d
}

// resetDec points the jsontext decoder at d.buf.
func (d *objDecoder) resetDec() {
	d.dec.Reset(&d.buf, decodeOpts)
	d.decUsed = true
}

// release drops every reference into the input and the decoded values,
// then pools d. The jsontext decoder is reset only when it read
// something: a reset costs about 1 % of a contract request's CPU, and
// the one-pass check mostly never uses it.
func (d *objDecoder) release() {
	d.buf = bytes.Buffer{}
	if d.decUsed {
		d.dec.Reset(&d.buf, decodeOpts)
		d.decUsed = false
	}
	d.sc, d.in = nil, nil
	objDecoderPool.Put(d)
}

// Duplicate names are found with the maps we build anyway, which is cheaper
// than jsontext's own name tracking.
var decodeOpts = jsontext.AllowDuplicateNames(true)

var objDecoderPool = sync.Pool{New: func() any { return new(objDecoder) }}

type objDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
	// decUsed: dec was pointed at an input since it was pooled (release
	// resets it then, so a pooled dec holds no reference into an input).
	decUsed bool
	scan    jsonscan.Scanner // the one-pass check's (stream.go)
	stack   []decodeFrame
	vals    []any        // the elements of open arrays, innermost last
	mems    []openMember // the members of open objects not yet in a map
	arena   []byte
	slab    []string // boxed strings and numbers (see box)
	size    int      // of the input, to size arena and slab chunks
	sc      *decodeScratch

	// The one-pass check's state (stream.go): its open containers, the
	// names of open objects, the members and elements it keeps, the input.
	sstack []streamFrame
	snames []string
	pmems  []openMember
	pvals  []any
	in     []byte
}

// decodeScratch is the storage of one decoded value kept for the next
// decode: its maps (cleared), arrays, string arena and box slab. A contract
// keeps one per concurrent check and hands it back only once nothing can
// see the value any more (Contract.Check, on the valid path), so a
// contract's outputs, which mostly have the same shape, are decoded
// without allocating. Within one check the cursors only move forward, so
// several decodes (lenient candidates, a {"text": …} wrapper's string) never
// share storage.
type decodeScratch struct {
	maps   []map[string]any // in the order objects closed
	arrays [][]any
	nm, na int // handed out so far
	arena  []byte
	slab   []string
}

// Bounds on what a scratch keeps: a rare huge output's storage is left to
// the collector rather than held for every later check.
const (
	scratchMaxMap   = 256      // members
	scratchMaxBytes = 64 << 10 // arena
	scratchMaxItems = 4096     // maps, arrays, array elements, boxes
)

// reset makes sc's storage reusable: every value decoded from it must be
// unreachable by now. It reports whether sc is worth keeping.
func (sc *decodeScratch) reset() bool {
	for i, m := range sc.maps[:sc.nm] {
		if len(m) > scratchMaxMap {
			sc.maps[i] = nil
			continue
		}
		clear(m)
	}
	items := len(sc.maps) + len(sc.arrays) + cap(sc.slab)
	for i, a := range sc.arrays[:sc.na] {
		clear(a[:cap(a)])
		items += cap(a)
		if cap(a) > scratchMaxItems {
			sc.arrays[i] = nil
		}
	}
	clear(sc.slab)
	sc.nm, sc.na, sc.arena, sc.slab = 0, 0, sc.arena[:0], sc.slab[:0]
	return items <= scratchMaxItems && cap(sc.arena) <= scratchMaxBytes
}

// mapFor returns an empty map for an object of about n members.
func (d *objDecoder) mapFor(n int) map[string]any {
	sc := d.sc
	if sc == nil {
		return make(map[string]any, n)
	}
	if sc.nm == len(sc.maps) {
		sc.maps = append(sc.maps, nil)
	}
	m := sc.maps[sc.nm]
	if m == nil {
		m = make(map[string]any, n)
		sc.maps[sc.nm] = m
	}
	sc.nm++
	return m
}

// arrayFor returns an array of n elements, to be overwritten.
func (d *objDecoder) arrayFor(n int) []any {
	sc := d.sc
	if sc == nil {
		return make([]any, n) // non-nil even when empty: [] stays []
	}
	if sc.na == len(sc.arrays) {
		sc.arrays = append(sc.arrays, nil)
	}
	a := sc.arrays[sc.na]
	if cap(a) < n || a == nil {
		a = make([]any, n, max(n, 4))
		sc.arrays[sc.na] = a
	}
	sc.na++
	return a[:n]
}

// openMember is one member of an open object, kept until the object closes so
// its map is made once at its final size.
type openMember struct {
	name string
	val  any
}

// decodeFrame is one open container. An object's members wait in the
// decoder's mems from start (n so far), its current member's name in name
// (named set) until its value is complete; past smallObject members they
// move to obj, whose inserts then find repeated names. An array's n
// elements so far sit in the decoder's vals from start, so that each array
// is allocated once, at its exact size.
type decodeFrame struct {
	isObj    bool
	obj      map[string]any
	start, n int
	name     string
	named    bool
}

// smallObject is the member count up to which repeated names are found by
// comparing with the members so far, and the map is made only when the
// object closes; larger objects are built in their map as they are read.
const smallObject = 16

// run is an explicit-stack token loop, so depth costs heap, not goroutine
// stack, and the depth check comes before a container is entered.
func (d *objDecoder) run(base, maxDepth int) (any, *Violation) {
	st := d.stack[:0]
	d.arena, d.slab = nil, nil
	if d.sc != nil {
		d.arena, d.slab = d.sc.arena, d.sc.slab
	}
	defer func() {
		if d.sc != nil {
			// The chunks in use now, whose unused tails the next decode
			// of this check continues in.
			d.sc.arena, d.sc.slab = d.arena, d.slab
		}
		// Popped frames linger past len(st); vals and mems are cleared as
		// they shrink.
		clear(st[:cap(st)])
		clear(d.vals)
		clear(d.mems)
		d.stack, d.vals, d.mems, d.arena, d.slab = st[:0], d.vals[:0], d.mems[:0], nil, nil
		if cap(st) > 1024 || cap(d.vals) > 1<<16 || cap(d.mems) > 1<<16 { // not worth pooling
			d.stack, d.vals, d.mems = nil, nil, nil
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
				v = d.box(d.str(raw, false), numberType)
				break
			}
			s := d.str(raw, true)
			// jsontext enforces that names and values alternate, so in an
			// object without a pending name a string is the next name.
			if top := len(st) - 1; top >= 0 && st[top].isObj && !st[top].named {
				st[top].name, st[top].named = s, true
				continue
			}
			v = d.box(s, stringType)
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
					st = append(st, decodeFrame{isObj: true, start: len(d.mems)})
				} else {
					st = append(st, decodeFrame{start: len(d.vals)})
				}
				continue
			case '}':
				v = d.closeObject(&st[len(st)-1])
				st = st[:len(st)-1]
			case ']':
				f := st[len(st)-1]
				a := d.arrayFor(f.n)
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
		if !top.isObj {
			d.vals = append(d.vals, v)
			top.n++
			continue
		}
		top.named = false
		if !d.addMember(top, v) {
			ptr := framesPointer(st[:len(st)-1]) + "/" + EscapePointerToken(top.name)
			return nil, parseViolation(RuleDuplicateKey, fmt.Sprintf("duplicate key %s at %s", strconv.Quote(top.name), ptr))
		}
	}
}

// addMember adds the member named f.name to the open object f, reporting
// false when the name is already there.
func (d *objDecoder) addMember(f *decodeFrame, v any) bool {
	if f.obj != nil {
		// One hash operation both inserts and detects a repeated name.
		n := len(f.obj)
		f.obj[f.name] = v
		return len(f.obj) > n
	}
	mems := d.mems[f.start:]
	for i := range mems {
		if mems[i].name == f.name {
			return false
		}
	}
	if len(mems) < smallObject {
		d.mems = append(d.mems, openMember{f.name, v})
		f.n++
		return true
	}
	f.obj = d.mapFor(2 * smallObject)
	for _, m := range mems {
		f.obj[m.name] = m.val
	}
	clear(mems)
	d.mems = d.mems[:f.start]
	f.obj[f.name] = v
	return true
}

// closeObject returns the map of the object f, which ends here.
func (d *objDecoder) closeObject(f *decodeFrame) map[string]any {
	if f.obj != nil {
		return f.obj
	}
	m := d.mapOf(d.mems[f.start:])
	d.mems = d.mems[:f.start]
	return m
}

// mapOf builds the map of an object's members and clears them, so the
// reused slice holds no value once the map does.
func (d *objDecoder) mapOf(mems []openMember) map[string]any {
	m := d.mapFor(len(mems))
	for _, e := range mems {
		m[e.name] = e.val
	}
	clear(mems)
	return m
}

// str copies a raw number, or a raw string unquoted, into the arena. The
// arena is fresh per decode (or per check, with a scratch) and never written
// twice while its strings are reachable, so strings may alias it.
func (d *objDecoder) str(raw []byte, quoted bool) string {
	n := len(raw) // unquoting never lengthens
	if cap(d.arena)-len(d.arena) < n {
		d.arena = make([]byte, 0, max(n, min(d.size, 32<<10)))
	}
	start := len(d.arena)
	if quoted {
		// raw was validated by ReadValue (jsonstr.AppendUnquote's
		// precondition), so this cannot fail.
		d.arena = jsonstr.AppendUnquote(d.arena, raw)
	} else {
		d.arena = append(d.arena, raw...)
	}
	if len(d.arena) == start {
		return ""
	}
	return unsafe.String(&d.arena[start], len(d.arena)-start)
}

// box returns s as an interface value of type typ (string or json.Number,
// whose representations are the same). Converting a string to an
// interface allocates its header on its own; here headers are carved from
// a slab instead, fresh per decode (a scratch's is reused only once every
// value boxed in it is unreachable) and never written again once boxed,
// which is what the conversion guarantees too: one allocation for a few
// dozen values. The interface's data word points into the slab, which
// keeps the slab alive as long as any value from it is.
func (d *objDecoder) box(s string, typ unsafe.Pointer) any {
	if len(d.slab) == cap(d.slab) {
		d.slab = make([]string, 0, min(max(d.size/24, 8), 512))
	}
	d.slab = append(d.slab, s)
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, unsafe.Pointer(&d.slab[len(d.slab)-1])
	return v
}

// eface is the layout of an interface{} value.
type eface struct {
	typ, data unsafe.Pointer
}

// typeWord is the type word of v's interface value.
func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	stringType = typeWord("")
	numberType = typeWord(json.Number(""))
)

// framesPointer is the JSON Pointer of the value being built in the innermost
// decodeFrame of st (of st's next child, to be exact).
func framesPointer(st []decodeFrame) string {
	var sb strings.Builder
	for i := range st {
		sb.WriteByte('/')
		if st[i].isObj {
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
