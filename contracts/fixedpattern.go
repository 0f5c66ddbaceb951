package contracts

import "regexp/syntax"

// fixedPattern is a pattern that matches exactly the strings of one fixed
// length whose every byte is in that position's set of ASCII bytes: a
// regexp anchored at both ends (^…$) made only of ASCII literals and
// ASCII classes, each repeated a fixed number of times, like
// ^TCK-[0-9]{8}-[0-9]{4}$. Such a regexp matches a string exactly when
// its bytes are those: each of its items matches one ASCII rune, so a
// match is a string of ASCII runes, one byte each, and a byte of 0x80 or
// above (in a valid rune or not) matches no item. Checking the bytes
// costs a fraction of regexp's one-pass matcher, which the schema keyword
// ran on every output.
type fixedPattern [][2]uint64 // per position, the bytes allowed (bit c of word c>>6)

// maxFixedPattern bounds the positions a fixed pattern holds.
const maxFixedPattern = 256

// compileFixedPattern returns p's fixedPattern; false when p is not of
// that form. p is parsed as regexp.Compile parses it (syntax.Perl).
func compileFixedPattern(p string) (fixedPattern, bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil, false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 ||
		re.Sub[0].Op != syntax.OpBeginText || re.Sub[len(re.Sub)-1].Op != syntax.OpEndText {
		return nil, false
	}
	var fp fixedPattern
	for _, s := range re.Sub[1 : len(re.Sub)-1] {
		var ok bool
		if fp, ok = fp.add(s); !ok {
			return nil, false
		}
	}
	return fp, true
}

// add appends the positions re matches to fp; false when re is not a
// sequence of ASCII-only literals and classes.
func (fp fixedPattern) add(re *syntax.Regexp) (fixedPattern, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return fp, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		for _, r := range re.Rune {
			var set [2]uint64
			if !setRange(&set, r, r) {
				return nil, false
			}
			fp = append(fp, set)
		}
	case syntax.OpCharClass:
		var set [2]uint64
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if !setRange(&set, re.Rune[i], re.Rune[i+1]) {
				return nil, false
			}
		}
		fp = append(fp, set)
	case syntax.OpConcat, syntax.OpCapture:
		for _, s := range re.Sub {
			var ok bool
			if fp, ok = fp.add(s); !ok {
				return nil, false
			}
		}
	case syntax.OpRepeat:
		if re.Min != re.Max || re.Min < 0 {
			return nil, false
		}
		for range re.Min {
			var ok bool
			if fp, ok = fp.add(re.Sub[0]); !ok {
				return nil, false
			}
		}
	default:
		return nil, false
	}
	return fp, len(fp) <= maxFixedPattern
}

// setRange adds the runes lo..hi to set; false when any is not ASCII.
func setRange(set *[2]uint64, lo, hi rune) bool {
	if lo < 0 || hi >= 0x80 || lo > hi {
		return false
	}
	for c := lo; c <= hi; c++ {
		set[c>>6] |= 1 << (c & 63)
	}
	return true
}

// match reports whether s matches the pattern fp was compiled from.
func (fp fixedPattern) match(s string) bool {
	if len(s) != len(fp) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || fp[i][c>>6]&(1<<(c&63)) == 0 {
			return false
		}
	}
	return true
}
