package contracts

import (
	"fmt"
	"strconv"
	"strings"
)

// JSON Pointers (RFC 6901), the one implementation every package uses:
// violation paths, policy paths, the fast path's $ref targets.

// PointerError is a pointer that does not parse: it does not start with
// "/", or a "~" in Segment is not followed by "0" or "1".
type PointerError struct {
	Pointer, Segment string
}

func (e *PointerError) Error() string {
	if e.Segment == "" {
		return fmt.Sprintf("JSON Pointer %q must start with \"/\"", e.Pointer)
	}
	return fmt.Sprintf("JSON Pointer %q: bad escape in %q", e.Pointer, e.Segment)
}

// PointerTokens splits p into its unescaped reference tokens ("" is the
// whole document: no tokens).
func PointerTokens(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, &PointerError{Pointer: p}
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		for j := 0; j < len(seg); j++ {
			if seg[j] == '~' {
				if j+1 >= len(seg) || (seg[j+1] != '0' && seg[j+1] != '1') {
					return nil, &PointerError{Pointer: p, Segment: seg}
				}
				j++
			}
		}
		segs[i] = UnescapePointerToken(seg)
	}
	return segs, nil
}

// EscapePointerToken escapes one reference token per RFC 6901.
func EscapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// UnescapePointerToken reverses EscapePointerToken.
func UnescapePointerToken(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// ComparePointers compares two JSON Pointers segment by segment: a prefix
// sorts first, numeric segments compare numerically and before names.
func ComparePointers(a, b string) int {
	if a == b {
		return 0
	}
	as, bs := splitPointer(a), splitPointer(b)
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := compareSegment(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}

func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

func compareSegment(a, b string) int {
	an, aerr := strconv.ParseUint(a, 10, 64)
	bn, berr := strconv.ParseUint(b, 10, 64)
	switch {
	case aerr == nil && berr == nil:
		if an != bn {
			if an < bn {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b) // "01" vs "1"
	case aerr == nil:
		return -1
	case berr == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// PointerIndex parses a reference token as an RFC 6901 array index: "0"
// or digits without a leading zero, at most 15 of them (so it fits an
// int). "-" (past the end) never addresses an existing element.
func PointerIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 15 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
