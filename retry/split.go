package retry

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The o200k_base and cl100k_base pre-tokenizers, written out: each
// returns the length in bytes of the piece its pattern (patO200k,
// patCl100k) matches at the start of a non-empty s, as regexp2 matches it
// (leftmost alternative first, greedy with backtracking), without
// regexp2's allocations (a match object and its captures per piece:
// nearly all of a count's garbage). s is read as runes, an invalid byte
// as U+FFFD, as tiktoken-go does. TestSplitAgrees and FuzzSplitAgrees
// hold them to the patterns piece by piece.

// Rune classes, as regexp2 defines them: \p{..} is Go's unicode table of
// that name and \s is unicode.IsSpace.
const (
	cLetter = 1 << iota // \p{L}
	cUpper              // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower              // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cNumber             // \p{N}
	cSpace              // \s
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = runeClass(r)
	}
	return t
}()

func runeClass(r rune) uint8 {
	switch {
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		return cLetter | cUpper
	case unicode.Is(unicode.Ll, r):
		return cLetter | cLower
	case unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r):
		return cLetter | cUpper | cLower
	case unicode.Is(unicode.M, r):
		return cUpper | cLower
	case unicode.Is(unicode.N, r):
		return cNumber
	case unicode.IsSpace(r):
		return cSpace
	}
	return 0
}

// classAt is the rune at s[i:], its class and its length (an invalid byte is
// U+FFFD, of length 1).
func classAt(s string, i int) (rune, uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, runeClass(r), n
}

// runEnd is the end of the run of runes from s[i:] whose class has a bit of
// want.
func runEnd(s string, i int, want uint8) int {
	for i < len(s) {
		_, c, n := classAt(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// isPrefix is [^\r\n\p{L}\p{N}].
func isPrefix(r rune, c uint8) bool {
	return c&(cLetter|cNumber) == 0 && r != '\r' && r != '\n'
}

// isOther is [^\s\p{L}\p{N}].
func isOther(c uint8) bool { return c&(cSpace|cLetter|cNumber) == 0 }

// contraction is the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i:], or i
// when there is none. regexp2 folds case with unicode.ToLower.
func contraction(s string, i int) int {
	if i >= len(s) || s[i] != '\'' || i+1 >= len(s) {
		return i
	}
	r, _, n := classAt(s, i+1)
	switch unicode.ToLower(r) {
	case 's', 't', 'm', 'd':
		return i + 1 + n
	case 'r', 'v':
		if j := i + 1 + n; j < len(s) {
			if r2, _, n2 := classAt(s, j); unicode.ToLower(r2) == 'e' {
				return j + n2
			}
		}
	case 'l':
		if j := i + 1 + n; j < len(s) {
			if r2, _, n2 := classAt(s, j); unicode.ToLower(r2) == 'l' {
				return j + n2
			}
		}
	}
	return i
}

// numbers is \p{N}{1,3} at s[0:] (its first rune a number, of length n).
func numbers(s string, n int) int {
	for k := 1; k < 3 && n < len(s); k++ {
		_, c, m := classAt(s, n)
		if c&cNumber == 0 {
			break
		}
		n += m
	}
	return n
}

// others is ` ?[^\s\p{L}\p{N}]+` then a run of tail's bytes at s[0:],
// or 0 when it does not match.
func others(s string, r0 rune, c0 uint8, n0 int, tail string) int {
	i := 0
	if r0 == ' ' && n0 < len(s) {
		if _, c, _ := classAt(s, n0); isOther(c) {
			i = n0
		}
	}
	if i == 0 && !isOther(c0) {
		return 0
	}
	for i < len(s) {
		_, c, n := classAt(s, i)
		if !isOther(c) {
			break
		}
		i += n
	}
	for i < len(s) && strings.IndexByte(tail, s[i]) >= 0 {
		i++
	}
	return i
}

// spaces is what `\s*[\r\n]+|\s+(?!\S)|\s+` matches at s[0:], whose
// first rune is a space.
func spaces(s string) int {
	i, last, nl := 0, 0, -1
	for i < len(s) {
		r, c, n := classAt(s, i)
		if c&cSpace == 0 {
			break
		}
		if r == '\r' || r == '\n' {
			nl = i
		}
		last = i
		i += n
	}
	switch {
	case nl >= 0: // \s*[\r\n]+: up to the run's last line break
		return nl + 1
	case i == len(s) || last == 0: // \s+ (?!\S) at the end, or \s+
		return i
	}
	return last // \s+(?!\S): all but the last, which a non-space follows
}

// splitO200k is patO200k:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitO200k(s string) int {
	r0, c0, n0 := classAt(s, 0)
	prefix := isPrefix(r0, c0)
	if prefix {
		if i := upperLower(s, n0); i > 0 {
			return i
		}
	}
	if i := upperLower(s, 0); i > 0 {
		return i
	}
	if prefix {
		if i := upperThenLower(s, n0); i > n0 {
			return i
		}
	}
	if i := upperThenLower(s, 0); i > 0 {
		return i
	}
	if c0&cNumber != 0 {
		return numbers(s, n0)
	}
	if i := others(s, r0, c0, n0, "\r\n/"); i > 0 {
		return i
	}
	return spaces(s)
}

// upperLower is the end of `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+`
// and a contraction at s[i:], or 0 when they do not match.
func upperLower(s string, i int) int {
	// The upper run, greedy, then at least one lower: when the rune after
	// the run is not lower, the run gives back up to its last rune that is
	// both, which is then the whole lower run (the runes after it in the
	// run are upper only).
	last := -1
	for i < len(s) {
		_, c, n := classAt(s, i)
		if c&cUpper == 0 {
			break
		}
		if c&cLower != 0 {
			last = i + n
		}
		i += n
	}
	if i < len(s) {
		if _, c, _ := classAt(s, i); c&cLower != 0 {
			return contraction(s, runEnd(s, i, cLower))
		}
	}
	if last < 0 {
		return 0
	}
	return contraction(s, last)
}

// upperThenLower is the end of `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*`
// and a contraction at s[i:], or i when they do not match.
func upperThenLower(s string, i int) int {
	j := runEnd(s, i, cUpper)
	if j == i {
		return i
	}
	return contraction(s, runEnd(s, j, cLower))
}

// splitCl100k is patCl100k:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCl100k(s string) int {
	if i := contraction(s, 0); i > 0 {
		return i
	}
	r0, c0, n0 := classAt(s, 0)
	if isPrefix(r0, c0) && n0 < len(s) {
		if _, c, _ := classAt(s, n0); c&cLetter != 0 {
			return runEnd(s, n0, cLetter)
		}
	}
	if c0&cLetter != 0 {
		return runEnd(s, 0, cLetter)
	}
	if c0&cNumber != 0 {
		return numbers(s, n0)
	}
	if i := others(s, r0, c0, n0, "\r\n"); i > 0 {
		return i
	}
	return spaces(s)
}
