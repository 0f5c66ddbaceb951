package jsonstr

import (
	"bytes"
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
	dst, _ = AppendUnquoteSame(dst, q)
	return dst
}

// AppendUnquoteSame is AppendUnquote, also reporting whether q is exactly
// what Append writes for the value appended (every escape the one Append
// writes for its character, and no character Append would escape left
// as it is), so a caller that holds q can send it on instead of quoting
// the value again. FuzzAppendUnquoteAgrees holds same to Append.
func AppendUnquoteSame(dst, q []byte) (out []byte, same bool) {
	s := q[1 : len(q)-1]
	if !utf8.Valid(s) {
		return slowUnquote(dst, q), false
	}
	// Unquoting never lengthens: the value is written in place into room
	// for s, byte by byte (the runs between escapes are short in JSON
	// content, where every quote is escaped).
	start := len(dst)
	dst = slices.Grow(dst, len(s))
	out = dst[start : start+len(s)]
	same = true
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
					return slowUnquote(dst[:start], q), false
				}
				if r = utf16.DecodeRune(r, rune(hex4(s[i+8:i+12]))); r == utf8.RuneError {
					return slowUnquote(dst[:start], q), false
				}
				n = 12
				same = false // Append writes the character itself
			} else if same {
				same = shortEscape[r&0x7F] == 0 && (r < 0x20 || r == '\u2028' || r == '\u2029') &&
					lowerHex(s[i+2:i+6])
			}
			j += utf8.EncodeRune(out[j:], r)
			i += n
		default:
			if c == '/' {
				same = false // Append writes a plain slash
			}
			out[j] = unescape[c]
			i += 2
			j++
		}
	}
	// Unescaped, a decoder lets through no control character, quote or
	// backslash: Append copies all the rest as they are but U+2028 and
	// U+2029, which it escapes.
	return dst[:start+j], same && !hasLineSeparator(s)
}

// hasLineSeparator reports whether s holds U+2028 or U+2029 (E2 80 A8,
// E2 80 A9) as they are; a search for their first byte, which ASCII text
// does not hold, instead of a comparison per byte in the loop above.
func hasLineSeparator(s []byte) bool {
	for {
		i := bytes.IndexByte(s, 0xE2)
		if i < 0 || i+2 >= len(s) {
			return false
		}
		if s[i+1] == 0x80 && s[i+2]&^1 == 0xA8 {
			return true
		}
		s = s[i+1:]
	}
}

// shortEscape marks the control characters Append writes as a two-letter
// escape rather than \u00XX.
var shortEscape = [128]byte{'\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// lowerHex: four hexadecimal digits with no capital letter, as Append
// writes them.
func lowerHex(h []byte) bool {
	for _, c := range h[:4] {
		if c >= 'A' && c <= 'F' {
			return false
		}
	}
	return true
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
