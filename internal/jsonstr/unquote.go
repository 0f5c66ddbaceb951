package jsonstr

import (
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// AppendUnquote appends the value of q, a JSON string literal that a
// jsontext decoder has already read whole (so its quotes and escapes are
// well formed), to dst: exactly what jsontext.AppendUnquote appends, in
// one pass that copies the runs between escapes in bulk instead of
// checking every byte again. Invalid UTF-8 in q and escaped surrogates
// that do not pair (both only possible with AllowInvalidUTF8, and rare)
// go to jsontext.AppendUnquote itself. FuzzAppendUnquoteAgrees holds the
// two to the same result.
func AppendUnquote(dst, q []byte) []byte {
	s := q[1 : len(q)-1]
	if !utf8.Valid(s) {
		return slowUnquote(dst, q)
	}
	// Unquoting never lengthens: the value is written in place into room
	// for s, byte by byte (the runs between escapes are short in JSON
	// content, where every quote is escaped).
	start := len(dst)
	dst = slices.Grow(dst, len(s))
	out := dst[start : start+len(s)]
	j := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out[j] = c
			i++
			j++
			continue
		}
		switch c = s[i+1]; c {
		case 'u':
			r := rune(hex4(s[i+2 : i+6]))
			n := 6
			if utf16.IsSurrogate(r) {
				if len(s) < i+12 || s[i+6] != '\\' || s[i+7] != 'u' {
					return slowUnquote(dst[:start], q)
				}
				if r = utf16.DecodeRune(r, rune(hex4(s[i+8:i+12]))); r == utf8.RuneError {
					return slowUnquote(dst[:start], q)
				}
				n = 12
			}
			j += utf8.EncodeRune(out[j:], r)
			i += n
		default:
			out[j] = unescape[c]
			i += 2
			j++
		}
	}
	return dst[:start+j]
}

func slowUnquote(dst, q []byte) []byte {
	dst, _ = jsontext.AppendUnquote(dst, q)
	return dst
}

// unescape maps the letter of a one-letter escape to its byte.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads four hexadecimal digits (valid: the decoder checked them).
func hex4(h []byte) uint16 {
	var v uint16
	for _, c := range h[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		v = v<<4 | uint16(c)
	}
	return v
}
