// Package jsonscan reads one JSON value token by token, accepting exactly
// what jsontext's Decoder accepts for one value with duplicate names
// allowed: the RFC 8259 grammar, JSON whitespace only, valid UTF-8 and
// escapes in strings (or, with AllowInvalidUTF8, invalid UTF-8 and lone
// surrogate escapes, as jsontext.AllowInvalidUTF8), at most 10,000 open
// containers. FuzzScanAgrees holds it to jsontext.
//
// It exists for the two token walks on the contract route's hot path (the
// one-pass contract check and the upstream reply's read), which read every
// token of every request: jsontext's Decoder costs more per token than
// these walks need (its state machine, resumable reads from an io.Reader,
// error detail), while this reads a byte slice in place and reports only
// whether the input is accepted and where it stopped. Both walks treat any
// error as "not accepted" (the contract check then runs its full path,
// which reports the violation through jsontext; the reply is then not a
// completion), so errors carry only an offset.
//
// Duplicate names are not tracked: both walks find them with their own
// structures, or accept them as json v2 with AllowDuplicateNames does.
package jsonscan

import (
	"encoding/binary"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the kind of a token, spelt as jsontext.Kind is: 'n', 'f', 't',
// '"', '0' (any number), '{', '}', '[', ']'; 0 when there is no next token
// (an error, or the end of the value).
type Kind byte

// MaxDepth is how many containers may be open at once, jsontext's limit.
const MaxDepth = 10000

// Error is an input the scanner does not accept; Offset is the byte at or
// after which it stopped.
type Error struct {
	Offset int
}

func (e *Error) Error() string {
	return "jsonscan: invalid JSON at or after byte " + strconv.Itoa(e.Offset)
}

// The states of the innermost open container, or of the top level.
const (
	stTop      uint8 = iota // nothing read yet
	stTopDone               // the one value has been read
	stObjEmpty              // after '{'
	stObjName               // after a member name: ':' and a value next
	stObjValue              // after a member's value: ',' or '}' next
	stArrEmpty              // after '['
	stArrValue              // after an element: ',' or ']' next
)

// Scanner reads one JSON value from a byte slice. The zero Scanner reads
// an empty input; Reset starts it on another.
type Scanner struct {
	b     []byte
	i     int     // just past the last token read
	last  uint8   // the state of the innermost container, or the top level's
	stack []uint8 // the enclosing states of open containers, innermost last
	// The next token, once peeked: its kind and offset (pk 0: not peeked).
	pk  Kind
	pkI int

	allowInvalidUTF8 bool
	esc              bool // the last string read held an escape
}

// Reset makes s read b from its start. allowInvalidUTF8 accepts strings
// with invalid UTF-8 or unpaired surrogate escapes, as
// jsontext.AllowInvalidUTF8(true) does.
func (s *Scanner) Reset(b []byte, allowInvalidUTF8 bool) {
	s.b, s.i, s.last, s.stack, s.pk, s.pkI = b, 0, stTop, s.stack[:0], 0, 0
	s.allowInvalidUTF8 = allowInvalidUTF8
}

// InputOffset is the offset just past the last token read.
func (s *Scanner) InputOffset() int { return s.i }

// Escaped reports whether the last string read (a name or a value, by
// ReadToken or ReadValue) held a backslash escape: false means its bytes
// between the quotes are its value.
func (s *Scanner) Escaped() bool { return s.esc }

// Depth is the number of open containers.
func (s *Scanner) Depth() int { return len(s.stack) }

// Done reports whether the value has been read whole and only JSON
// whitespace follows it.
func (s *Scanner) Done() bool {
	return s.last == stTopDone && skipWS(s.b, s.i) == len(s.b)
}

// kindOf is the kind of the token a byte starts; 0 for any other byte.
var kindOf = func() (t [256]Kind) {
	for _, c := range []byte(`nft"{}[]`) {
		t[c] = Kind(c)
	}
	t['-'] = '0'
	for c := '0'; c <= '9'; c++ {
		t[c] = '0'
	}
	return t
}()

// PeekKind is the kind of the next token, past the separator before it;
// 0 when the input has none here (an error, or the end of the value).
func (s *Scanner) PeekKind() Kind {
	if s.pk == 0 {
		s.pk, s.pkI = s.peek()
	}
	return s.pk
}

// peek finds the next token as the grammar allows it at this point: the
// separator it needs (',' or ':') is consumed first.
func (s *Scanner) peek() (Kind, int) {
	b := s.b
	i := skipWS(b, s.i)
	if i >= len(b) {
		return 0, i
	}
	c := b[i]
	switch s.last {
	case stTop, stArrEmpty:
		if c == ']' && s.last == stArrEmpty {
			return ']', i
		}
	case stObjEmpty:
		if c == '}' || c == '"' {
			return Kind(c), i
		}
		return 0, i
	case stObjName:
		if c != ':' {
			return 0, i
		}
		if i = skipWS(b, i+1); i >= len(b) {
			return 0, i
		}
	case stObjValue:
		if c == '}' {
			return '}', i
		}
		if c != ',' {
			return 0, i
		}
		if i = skipWS(b, i+1); i >= len(b) || b[i] != '"' {
			return 0, i
		}
		return '"', i
	case stArrValue:
		if c == ']' {
			return ']', i
		}
		if c != ',' {
			return 0, i
		}
		if i = skipWS(b, i+1); i >= len(b) {
			return 0, i
		}
	default: // stTopDone: one value only
		return 0, i
	}
	// A value must start at i.
	switch k := kindOf[b[i]]; k {
	case '}', ']':
		return 0, i
	default:
		return k, i
	}
}

// ReadToken reads the next token: a delimiter, a literal, a string or a
// number (the last two validated whole, as ReadValue does).
func (s *Scanner) ReadToken() (Kind, error) {
	k := s.PeekKind()
	i := s.pkI
	s.pk = 0
	switch k {
	case 0:
		return 0, &Error{Offset: i}
	case '{', '[':
		if len(s.stack) == MaxDepth {
			return 0, &Error{Offset: i}
		}
		s.stack = append(s.stack, s.after())
		if k == '{' {
			s.last = stObjEmpty
		} else {
			s.last = stArrEmpty
		}
		s.i = i + 1
		return k, nil
	case '}', ']':
		s.last = s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		s.i = i + 1
		return k, nil
	}
	n, ok := s.scalar(k, i)
	if !ok {
		return 0, &Error{Offset: i}
	}
	s.took(k, n)
	return k, nil
}

// took moves past a literal, string or number of kind k ending at n.
func (s *Scanner) took(k Kind, n int) {
	if k == '"' && (s.last == stObjEmpty || s.last == stObjValue) {
		s.last = stObjName
	} else {
		s.last = s.after()
	}
	s.i = n
}

// AppendString reads the next value when it is a string whose escapes are
// all one-letter ones (\" \\ \/ \b \f \n \r \t) and whose UTF-8 is valid,
// and appends its value to dst in the same pass: what ReadValue and then
// jsontext.AppendUnquote of the bytes it read give, without a second pass
// over them. raw is the string's literal (aliasing the input), same whether
// the literal is exactly what jsonstr.Append writes for the value (no \/,
// no U+2028 or U+2029 as they are). For anything else next (another kind,
// a \u escape, invalid UTF-8, an error) it reads nothing and ok is false:
// the caller reads the value as before, with ReadValue.
func (s *Scanner) AppendString(dst []byte) (out, raw []byte, same, ok bool) {
	if s.PeekKind() != '"' {
		return dst, nil, false, false
	}
	b, start := s.b, s.pkI
	// The value is never longer than what is left of the input: room for
	// it made once. Each run of plain bytes is found first and copied
	// whole (a copy per byte with its bounds checks cost more); escapes
	// are written byte by byte.
	n := len(dst)
	out = slices.Grow(dst, len(b)-start)
	out = out[:cap(out)]
	same, esc := true, false
	for i := start + 1; i < len(b); {
		if plain[b[i]] {
			j := i + 1
			for j < len(b) && plain[b[j]] {
				j++
			}
			n += copy(out[n:], b[i:j])
			if i = j; i >= len(b) {
				break
			}
		}
		switch c := b[i]; {
		case c == '"':
			s.pk, s.esc = 0, esc
			s.took('"', i+1)
			return out[:n], b[start : i+1], same, true
		case c == '\\':
			if i+1 >= len(b) || unescape[b[i+1]] == 0 {
				return dst, nil, false, false // \u or an error: ReadValue's
			}
			same = same && b[i+1] != '/' // Append writes a plain slash
			out[n] = unescape[b[i+1]]
			i += 2
			n++
			esc = true
		case c < utf8.RuneSelf:
			return dst, nil, false, false // a control character
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, nil, false, false
			}
			same = same && r != '\u2028' && r != '\u2029' // Append escapes them
			n += copy(out[n:], b[i:i+size])
			i += size
		}
	}
	return dst, nil, false, false
}

// after is the state the innermost container (or the top level) is in
// once the value starting now has been read.
func (s *Scanner) after() uint8 {
	switch s.last {
	case stTop:
		return stTopDone
	case stObjName:
		return stObjValue
	default: // stArrEmpty, stArrValue
		return stArrValue
	}
}

// ReadValue reads the next value whole (a member name counts as a value
// here, as in jsontext) and returns its bytes, which alias the input.
func (s *Scanner) ReadValue() ([]byte, error) {
	k := s.PeekKind()
	start := s.pkI
	switch k {
	case '{', '[':
		depth := len(s.stack)
		for {
			if _, err := s.ReadToken(); err != nil {
				return nil, err
			}
			if len(s.stack) == depth {
				return s.b[start:s.i], nil
			}
		}
	case '}', ']':
		s.pk = 0
		return nil, &Error{Offset: start}
	}
	if _, err := s.ReadToken(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// SkipValue reads the next value and drops it.
func (s *Scanner) SkipValue() error {
	_, err := s.ReadValue()
	return err
}

// scalar validates the literal, string or number of kind k at i and
// returns the offset just past it.
func (s *Scanner) scalar(k Kind, i int) (int, bool) {
	b := s.b[i:]
	switch k {
	case 'n':
		return i + 4, len(b) >= 4 && string(b[:4]) == "null"
	case 't':
		return i + 4, len(b) >= 4 && string(b[:4]) == "true"
	case 'f':
		return i + 5, len(b) >= 5 && string(b[:5]) == "false"
	case '"':
		n, esc, ok := s.str(b)
		s.esc = esc
		return i + n, ok
	default:
		n, ok := number(b)
		return i + n, ok
	}
}

// plain: bytes a string holds as they are, needing neither an escape nor
// UTF-8 decoding.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unescape maps the letter of a one-letter escape to its byte; 0 for
// any other byte ('u' included).
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// str validates the string literal at b's start and returns its length
// and whether it holds an escape.
func (s *Scanner) str(b []byte) (n int, esc, ok bool) {
	i := 1
	for {
		// Plain bytes four at a time by table: in JSON text quoted in a
		// string (a model's JSON output in a reply) the runs between
		// escapes are short. After 16, eight at a time by word: none
		// below 0x20, none a quote or backslash, none with the high bit.
		// Each test (the "has a byte less than n" and "has a zero byte"
		// bit tricks) may flag a byte above a real match but never misses
		// one, so a clear word holds only plain bytes.
		for run := 0; i+4 <= len(b) && plain[b[i]] && plain[b[i+1]] && plain[b[i+2]] && plain[b[i+3]]; run++ {
			i += 4
			if run == 3 {
				for i+8 <= len(b) {
					w := binary.LittleEndian.Uint64(b[i:])
					q, bs := w^(ones*'"'), w^(ones*'\\')
					if ((w-ones*0x20)&^w|(q-ones)&^q|(bs-ones)&^bs|w)&highs != 0 {
						break
					}
					i += 8
				}
				break
			}
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, esc, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			if i+1 < len(b) && unescape[b[i+1]] != 0 {
				i += 2 // the common case, without a call
				continue
			}
			n, ok := s.escape(b[i:])
			if !ok {
				return i, esc, false
			}
			i += n
		case c < 0x20:
			return i, esc, false
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 && !s.allowInvalidUTF8 {
				return i, esc, false
			}
			i += n
		}
	}
}

// escape validates the escape sequence at b's start and returns its length.
func (s *Scanner) escape(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
	default:
		return 0, false
	}
	v1, ok := hex4(b[2:])
	if !ok {
		return 0, false
	}
	if s.allowInvalidUTF8 || !utf16.IsSurrogate(rune(v1)) {
		return 6, true
	}
	// A surrogate must be the first of a pair, the second escaped next.
	if len(b) < 12 || b[6] != '\\' || b[7] != 'u' {
		return 0, false
	}
	v2, ok := hex4(b[8:])
	if !ok || utf16.DecodeRune(rune(v1), rune(v2)) == utf8.RuneError {
		return 0, false
	}
	return 12, true
}

// hex4 parses four hex digits at b's start.
func hex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var v uint16
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// number validates the number at b's start (RFC 8259: -?(0|[1-9][0-9]*)
// (\.[0-9]+)?([eE][+-]?[0-9]+)?) and returns its length. What follows it
// is the grammar's business: a number is never followed by a digit there.
func number(b []byte) (int, bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// skipWS is the offset of the first byte at or after i that is not JSON
// whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
