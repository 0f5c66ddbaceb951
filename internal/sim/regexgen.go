package sim

import (
	"math/rand/v2"
	"regexp/syntax"
	"strings"
	"unicode"
)

// preferred are the runes a generated character class picks from first, so
// "\S" gives "k" rather than some exotic code point.
const preferred = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_-"

// genFromPattern returns a string that the pattern matches (best effort;
// callers check). Unbounded repeats are kept short.
func genFromPattern(rng *rand.Rand, pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var sb strings.Builder
	genRegexp(rng, re.Simplify(), &sb, 0)
	return sb.String(), true
}

func genRegexp(rng *rand.Rand, re *syntax.Regexp, sb *strings.Builder, depth int) {
	if depth > 50 {
		return
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			sb.WriteRune(r)
		}
	case syntax.OpCharClass:
		sb.WriteRune(pickFromClass(rng, re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		sb.WriteByte(preferred[rng.IntN(26)])
	case syntax.OpCapture:
		for _, s := range re.Sub {
			genRegexp(rng, s, sb, depth+1)
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			genRegexp(rng, s, sb, depth+1)
		}
	case syntax.OpAlternate:
		genRegexp(rng, re.Sub[rng.IntN(len(re.Sub))], sb, depth+1)
	case syntax.OpStar:
		for i := rng.IntN(3); i > 0; i-- {
			genRegexp(rng, re.Sub[0], sb, depth+1)
		}
	case syntax.OpPlus:
		for i := 1 + rng.IntN(3); i > 0; i-- {
			genRegexp(rng, re.Sub[0], sb, depth+1)
		}
	case syntax.OpQuest:
		if rng.IntN(2) == 0 {
			genRegexp(rng, re.Sub[0], sb, depth+1)
		}
	case syntax.OpRepeat:
		hi := re.Max
		if hi < 0 || hi > re.Min+3 {
			hi = re.Min + 3
		}
		n := re.Min
		if hi > re.Min {
			n += rng.IntN(hi - re.Min + 1)
		}
		for ; n > 0; n-- {
			genRegexp(rng, re.Sub[0], sb, depth+1)
		}
	default:
		// Anchors, word boundaries, empty matches: nothing to write.
	}
}

// pickFromClass picks a rune from a class given as [lo, hi] pairs,
// preferring plain ASCII letters and digits.
func pickFromClass(rng *rand.Rand, ranges []rune) rune {
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if r >= ranges[i] && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	var cands []rune
	for _, r := range preferred {
		if in(r) {
			cands = append(cands, r)
		}
	}
	if len(cands) > 0 {
		return cands[rng.IntN(len(cands))]
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r < ranges[i]+256; r++ {
			if unicode.IsPrint(r) && !unicode.IsSpace(r) {
				return r
			}
		}
	}
	if len(ranges) > 0 {
		return ranges[0]
	}
	return 'x'
}
