// Package jsonstr quotes strings as encoding/json does with HTML escaping
// off, without reflection: the audit encoder and the proxy's answer writer
// both build JSON by hand on their hot paths and must quote alike. The
// log's request line (cmd/contractd) quotes as log/slog does, which
// differs in two escapes only (AppendSlog).
package jsonstr

import (
	"slices"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Append quotes s as encoding/json does without HTML escaping:
// control characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func Append(b []byte, s string) []byte { return appendQuoted(b, s, true) }

// AppendSlog quotes s as log/slog's JSONHandler does: as Append, except
// that \b and \f are written \u0008 and \u000c (slog names only \n, \r
// and \t), so a line written by hand keeps slog's bytes.
func AppendSlog(b []byte, s string) []byte { return appendQuoted(b, s, false) }

// AppendField appends key, the JSON text before a member's value (such as
// `,"route":`), then s quoted as Append quotes it: a string member of the
// hand-built encoders in one call.
func AppendField(b []byte, key, s string) []byte { return Append(append(b, key...), s) }

// appendQuoted is Append, or with bfByName false AppendSlog.
func appendQuoted(b []byte, s string, bfByName bool) []byte {
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
			switch {
			case c == '\\' || c == '"':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b' && bfByName:
				b = append(b, '\\', 'b')
			case c == '\f' && bfByName:
				b = append(b, '\\', 'f')
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
