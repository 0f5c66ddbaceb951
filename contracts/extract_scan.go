package contracts

import "strings"

// Text scanning for extraction: whitespace, markdown fences and balanced
// braces. Everything here is a single linear pass, whatever the input.

func isWSByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isWS reports whether b is only JSON whitespace.
func isWS(b []byte) bool {
	for _, c := range b {
		if !isWSByte(c) {
			return false
		}
	}
	return true
}

// trimWS trims JSON whitespace (not Unicode's: strict means JSON's) and
// returns the offset of what is left.
func trimWS(s string) (string, int) {
	i, j := 0, len(s)
	for i < j && isWSByte(s[i]) {
		i++
	}
	for j > i && isWSByte(s[j-1]) {
		j--
	}
	return s[i:j], i
}

// firstFence returns the contents of the first ``` fenced block and their
// offset in s. The info string ("json") is skipped. The block closes at the
// next fence that starts a line, else at the next ``` at all (a one-line
// ```{…}```), else at the end: a truncated reply still yields its contents.
func firstFence(s string) (string, int, bool) {
	i := strings.Index(s, "```")
	if i < 0 {
		return "", 0, false
	}
	j := i + 3
	for j < len(s) && s[j] == '`' {
		j++
	}
	for j < len(s) && isInfoByte(s[j]) {
		j++
	}
	rest := s[j:]
	end, first := len(rest), -1
	for off := 0; ; {
		k := strings.Index(rest[off:], "```")
		if k < 0 {
			break
		}
		k += off
		if first < 0 {
			first = k
		}
		if startsLine(rest, k) {
			first = k
			break
		}
		off = k + 3
	}
	if first >= 0 {
		end = first
	}
	return rest[:end], j, true
}

func isInfoByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '+' || c == '.'
}

// startsLine reports whether only spaces or tabs separate s[k] from the
// previous newline.
func startsLine(s string, k int) bool {
	for k > 0 && (s[k-1] == ' ' || s[k-1] == '\t') {
		k--
	}
	return k > 0 && s[k-1] == '\n'
}

// scanObjects calls yield with each maximal balanced {…} span of s in
// document order, until yield returns false; it returns the offset of the
// first '{' left unclosed at the end (a truncated object), or -1.
//
// Braces inside JSON strings do not count. Quotes are only tracked inside a
// span, since prose apostrophes and quotes are not JSON. A span's inner
// spans are not yielded (a balanced {…} that does not parse is skipped as a
// whole), except inside a '{' that never closes, where the spans it contains
// are the candidates. One pass with a stack, so adversarial inputs such as
// "{{{{…" stay linear.
func scanObjects(s string, yield func(start, end int) bool) (unclosed int) {
	type span struct{ start, end, depth int }
	var open []int     // offsets of unclosed '{'
	var pending []span // closed spans inside a still-open '{'
	var str stringScan
	for i := 0; i < len(s); i++ {
		c := s[i]
		if str.step(c, len(open) > 0) {
			continue
		}
		switch c {
		case '{':
			open = append(open, i)
		case '}':
			if len(open) == 0 {
				continue
			}
			start, d := open[len(open)-1], len(open)-1
			open = open[:d]
			// Spans nested in this one are no longer maximal.
			for len(pending) > 0 && pending[len(pending)-1].depth > d {
				pending = pending[:len(pending)-1]
			}
			if d > 0 {
				pending = append(pending, span{start, i + 1, d})
			} else if !yield(start, i+1) {
				return -1
			}
		}
	}
	for _, p := range pending {
		if !yield(p.start, p.end) {
			break
		}
	}
	if len(open) == 0 {
		return -1
	}
	return open[0]
}

// jsonDepth is the deepest bracket nesting of s outside double-quoted
// strings: a cheap bound checked before handing s to the (recursive) repair
// library.
func jsonDepth(s string) int {
	depth, maxd := 0, 0
	var str stringScan
	for i := 0; i < len(s); i++ {
		c := s[i]
		if str.step(c, true) {
			continue
		}
		switch c {
		case '{', '[':
			if depth++; depth > maxd {
				maxd = depth
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return maxd
}

// stringScan tracks whether a byte-by-byte scan is inside a JSON string, so
// brackets in strings are not counted.
type stringScan struct{ in, esc bool }

// step consumes c if the scan is inside a string, or if c opens one and
// quotes count (open), and reports whether it did.
func (st *stringScan) step(c byte, open bool) bool {
	if !st.in {
		st.in = open && c == '"'
		return st.in
	}
	switch {
	case st.esc:
		st.esc = false
	case c == '\\':
		st.esc = true
	case c == '"':
		st.in = false
	}
	return true
}
