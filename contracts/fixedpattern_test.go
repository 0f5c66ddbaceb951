package contracts

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// fixedPatternCases are patterns, fixed or not, for the agreement tests.
var fixedPatternCases = []struct {
	pattern string
	fixed   bool
}{
	{`^TCK-[0-9]{8}-[0-9]{4}$`, true},
	{`^[A-Z]{3}\d{2}$`, true},
	{`^abc$`, true},
	{`^$`, true},
	{`^(ab)[cd]x{0}$`, true},
	{`^[^a]$`, false},    // a negated class holds non-ASCII runes
	{`^(?i)abc$`, false}, // case folding
	{`^[a-z]+$`, false},  // not one length
	{`^[a-z]{2,3}$`, false},
	{`^.{3}$`, false}, // any rune
	{`abc`, false},    // unanchored
	{`^abc`, false},
	{`abc$`, false},
	{`(?m)^abc$`, false}, // line anchors
	{`^é{2}$`, false},    // non-ASCII literal
	{`^[a-é]$`, false},
	{`^a|b$`, false},
	{`^\bab$`, false},
	{`^[\x00-\x7f]{3}$`, true},
	{`^a{300}$`, false}, // longer than a fixed pattern holds
}

var fixedPatternInputs = []string{
	"", "a", "ab", "abc", "abcd", "ABC", "TCK-20240917-0042", "TCK-2024091-00420", "TCK-20240917-004",
	"TCK-20240917-0042\n", "\nTCK-20240917-0042", "TCK-2024091é-0042", "ABC12", "AB\xff12", "ABC1\x80",
	"abx", "abd", "ab\x00", "x", "é", "éé", "\xff", "\x7f\x00a", strings.Repeat("a", 300),
}

// TestFixedPatternAgrees: a fixed pattern matches what regexp matches,
// and only the patterns of that form are fixed.
func TestFixedPatternAgrees(t *testing.T) {
	for _, c := range fixedPatternCases {
		fp, ok := compileFixedPattern(c.pattern)
		if ok != c.fixed {
			t.Errorf("%q: fixed %v, want %v", c.pattern, ok, c.fixed)
			continue
		}
		if !ok {
			continue
		}
		re := regexp.MustCompile(c.pattern)
		for _, in := range fixedPatternInputs {
			if got, want := fp.match(in), re.MatchString(in); got != want {
				t.Errorf("%q on %q: fixed %v, regexp %v", c.pattern, in, got, want)
			}
		}
	}
}

// FuzzFixedPatternAgrees holds fixed patterns to regexp on any pattern
// and input.
func FuzzFixedPatternAgrees(f *testing.F) {
	for _, c := range fixedPatternCases {
		for _, in := range fixedPatternInputs[:6] {
			f.Add(c.pattern, in)
		}
	}
	f.Fuzz(func(t *testing.T, pattern, in string) {
		re, err := regexp.Compile(pattern)
		fp, ok := compileFixedPattern(pattern)
		if err != nil {
			if ok {
				t.Fatalf("%q does not compile but is fixed", pattern)
			}
			return
		}
		if !ok {
			return
		}
		if got, want := fp.match(in), re.MatchString(in); got != want {
			t.Fatalf("%q on %q: fixed %v, regexp %v", pattern, in, got, want)
		}
		// A string of the pattern's own bytes, to reach matches.
		if len(fp) > 0 {
			b := make([]byte, len(fp))
			for i, set := range fp {
				for c := range 128 {
					if set[c>>6]&(1<<(c&63)) != 0 {
						b[i] = byte(c)
						if len(in) > i && in[i] == byte(c) {
							break
						}
					}
				}
			}
			if got, want := fp.match(string(b)), re.MatchString(string(b)); got != want {
				t.Fatalf("%q on %q: fixed %v, regexp %v", pattern, b, got, want)
			}
		}
	})
}

// TestValidLenAgrees: minLength and maxLength decided from the byte length
// agree with counting runes, for valid and invalid UTF-8.
func TestValidLenAgrees(t *testing.T) {
	inputs := []string{"", "a", "abcd", "é", "éé", "日本語", "😀😀", "\xff", "a\xffb", "\xf0\x9f\x98", strings.Repeat("😀", 30), strings.Repeat("x", 41)}
	for _, s := range inputs {
		l := utf8.RuneCountInString(s)
		for lo := -1; lo <= 45; lo++ {
			for _, hasLo := range []bool{false, true} {
				for hi := -1; hi <= 45; hi++ {
					for _, hasHi := range []bool{false, true} {
						n := &fnode{hasMinLen: hasLo, minLen: lo, hasMaxLen: hasHi, maxLen: hi}
						want := (!hasLo || l >= lo) && (!hasHi || l <= hi)
						if got := n.validLen(s); got != want {
							t.Fatalf("%q (runes %d) min %v/%d max %v/%d: %v, want %v", s, l, hasLo, lo, hasHi, hi, got, want)
						}
					}
				}
			}
		}
	}
}
