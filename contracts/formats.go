package contracts

import (
	"unicode/utf8"

	"github.com/kaptinlin/jsonschema"
)

// formatOverrides replace validator format checks that are laxer than
// their RFCs. The library's uri/uri-reference checks rest on Go's
// url.Parse, which accepts spaces and other characters RFC 3986 forbids
// ("invalid uri" passed as a uri-reference). Each override keeps the
// library's check and adds the RFC 3986 character set (RFC 3987 for iri).
// Both the library path (registered per compiler) and the fast path use
// this table, so they cannot disagree.
var formatOverrides = map[string]func(any) bool{
	"uri":           func(v any) bool { return uriChars(v, false) && jsonschema.IsURI(v) },
	"iri":           func(v any) bool { return uriChars(v, true) && jsonschema.IsURI(v) },
	"uri-reference": func(v any) bool { return uriChars(v, false) && jsonschema.IsURIReference(v) },
	"iri-reference": func(v any) bool { return uriChars(v, true) && jsonschema.IsURIReference(v) },
	// Sentinels of dialect.go: checks the validator lacks.
	fmtDraft4Integer: draft4Integer,
	fmtEmptyEnum:     func(any) bool { return false },
}

// formatChecker is the checker for a format name, overrides first.
func formatChecker(name string) (func(any) bool, bool) {
	if f, ok := formatOverrides[name]; ok {
		return f, true
	}
	f, ok := jsonschema.Formats[name]
	return f, ok
}

// uriChars reports whether a string uses only characters a URI may hold:
// unreserved, reserved and percent-encoded octets (RFC 3986 §2), plus any
// non-ASCII character for IRIs. Non-strings pass (format applies to strings).
func uriChars(v any, iri bool) bool {
	s, ok := v.(string)
	if !ok {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		case c < utf8.RuneSelf:
			switch c {
			case '-', '.', '_', '~', ':', '/', '?', '#', '[', ']', '@', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=':
			default:
				return false
			}
		default:
			if !iri {
				return false
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError {
				return false
			}
			i += size - 1
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
