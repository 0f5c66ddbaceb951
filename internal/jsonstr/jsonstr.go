// Package jsonstr quotes strings as encoding/json does with HTML escaping
// off, without reflection: the audit encoder and the proxy's answer writer
// both build JSON by hand on their hot paths and must quote alike.
package jsonstr

import (
	"slices"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Append quotes s as encoding/json does without HTML escaping:
// control characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	// Room for s unescaped and a few escapes, so the loop below rarely
	// grows b; bytes that need no escaping are copied one by one (in JSON
	// content, where every quote is escaped, the runs between escapes are
	// too short for a copy call to pay).
	b = slices.Grow(b, len(s)+len(s)/8+2)
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// plain marks the bytes Append copies as they are: ASCII from the space
// up, except the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
