package retry

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// splitters are the written-out pre-tokenizers and the patterns they
// stand for.
var splitters = []struct {
	name  string
	split func(string) int
	re    *regexp2.Regexp
}{
	{"o200k_base", splitO200k, regexp2.MustCompile(patO200k, regexp2.None)},
	{"cl100k_base", splitCl100k, regexp2.MustCompile(patCl100k, regexp2.None)},
}

// splitEdges are texts at the patterns' edges: marks before and after
// letters, every letter category, contractions in every case and cut
// short, each kind of space and line break, and runs of them.
var splitEdges = []string{
	"\u0301A", "A\u0301", "a\u0301B", "\u0301\u0302", " \u0301a", "x\u0301", "\u0301", "\u0301'S",
	"ǅa", "ǅ", "Aǅb", "ʰA", "AʰB", "ʰʰ", "A\u0300\u0301B", "ABc", "ABCdEF", "aBC", "ᾈa", "ǈǉǊ", "中A", "A中b",
	"'S", "'s", "'LL", "'Ll", "'lL", "'l", "'Re", "'rE", "'r", "'VE", "'v", "'M", "'D", "'T", "'", "''s",
	"x'ſ", "'\u212a", "x'İ", "x'LL", "X'S", "X'", "don't", "DON'T", "they'Re", "we'vE", "I'M", "a'x", "1's", " 's", "\n's", "'s'S",
	" \u00a0x", "\u00a0\u00a0x", "\u2028\n", "\u0085x", "a\r\n\r\n  b", "  \n \t", "\n", "\r", "\r\n", " \n x",
	"\t\tX", "  x", "   ", " ", "x ", "x  ", "\u3000x", "\u3000\u3000", "x\u2029",
	"..//\n/\r", " ..", " .\n", "/\n/", "!?\r\n\r\n", " !", "  !", "$1", " $", "\u00bd\u00bd\u00bd\u00bd",
	"1234", "١٢٣٤", "12a", "a12", "1 2", "Ⅻ", "\xff\xfe", "x\xffy", " \xff", "\xffA", "\xef\xbf\xbd",
	"😀😀 😀", " 😀", "🇩🇪", "\x00\x01 \x1f", "\v\f x", "A'S'T", "Hello, World! It's 3:45pm.",
}

// pieces is where each piece of s ends, in bytes: by split, or by the
// pattern through regexp2 (which reads s as runes, and must cover it).
func pieces(t *testing.T, split func(string) int, re *regexp2.Regexp, s string) []int {
	var ends []int
	if split != nil {
		for at := 0; at < len(s); {
			n := split(s[at:])
			if n <= 0 || at+n > len(s) {
				t.Fatalf("split(%q) = %d", s[at:], n)
			}
			at += n
			ends = append(ends, at)
		}
		return ends
	}
	var offsets []int // the byte offset of each rune, and len(s)
	for i := range s {
		offsets = append(offsets, i)
	}
	offsets = append(offsets, len(s))
	m, err := re.FindRunesMatch([]rune(s))
	for last := 0; m != nil; m, err = re.FindNextMatch(m) {
		if m.Index != last {
			t.Fatalf("the pattern skips runes %d to %d of %q", last, m.Index, s)
		}
		last = m.Index + m.Length
		ends = append(ends, offsets[last])
	}
	if err != nil {
		t.Fatal(err)
	}
	return ends
}

func splitAgrees(t *testing.T, s string) {
	t.Helper()
	for _, sp := range splitters {
		got, want := pieces(t, sp.split, nil, s), pieces(t, nil, sp.re, s)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q splits at %v, the pattern at %v", sp.name, s, got, want)
		}
	}
}

func TestSplitAgrees(t *testing.T) {
	for _, s := range append(append([]string{}, agreeTexts...), splitEdges...) {
		splitAgrees(t, s)
	}
	// Every pair and triple of the edges' runes.
	var rs []rune
	seen := map[rune]bool{}
	for _, s := range splitEdges {
		for _, r := range s {
			if !seen[r] {
				seen[r] = true
				rs = append(rs, r)
			}
		}
	}
	for _, a := range rs {
		for _, b := range rs {
			splitAgrees(t, string([]rune{a, b}))
			splitAgrees(t, string([]rune{a, b, a}))
		}
	}
}

// TestRuneClasses holds the class table to the categories regexp2 reads
// for each rune: Go's unicode tables and unicode.IsSpace.
func TestRuneClasses(t *testing.T) {
	is := unicode.Is
	for r := rune(0); r <= unicode.MaxRune; r++ {
		var want uint8
		if is(unicode.L, r) {
			want |= cLetter
		}
		if is(unicode.Lu, r) || is(unicode.Lt, r) || is(unicode.Lm, r) || is(unicode.Lo, r) || is(unicode.M, r) {
			want |= cUpper
		}
		if is(unicode.Ll, r) || is(unicode.Lm, r) || is(unicode.Lo, r) || is(unicode.M, r) {
			want |= cLower
		}
		if is(unicode.N, r) {
			want |= cNumber
		}
		if unicode.IsSpace(r) {
			want |= cSpace
		}
		got := runeClass(r)
		if r < utf8.RuneSelf {
			got = asciiClass[r]
		}
		if got != want {
			t.Fatalf("class of %U = %05b, want %05b", r, got, want)
		}
	}
}

// runeMenu is what FuzzSplitAgrees builds text from besides its string:
// runes of every class the patterns tell apart.
var runeMenu = []rune("ſ\u212aİaZ ǅʰ中\u0301\u0903\u20dd1١Ⅻ½'sStTrRvVmMlLdDeE\r\n\t\v\f\u0085\u00a0\u2028\u3000/.!$😀\ufffd\x00")

func FuzzSplitAgrees(f *testing.F) {
	for _, s := range agreeTexts {
		f.Add(s, []byte{})
	}
	for _, s := range splitEdges {
		f.Add(s, []byte{0, 1, 2, 3, 4, 5, 6, 7})
	}
	f.Add("", []byte{200, 1, 7, 33, 12, 9, 250, 3, 0, 0, 17, 40})
	f.Fuzz(func(t *testing.T, s string, picks []byte) {
		if len(s) > 1000 || len(picks) > 1000 {
			return
		}
		var b strings.Builder
		b.WriteString(s)
		// Each pick is a rune of the menu, or with its high bit set and
		// the next byte a rune anywhere in the first planes.
		for i := 0; i < len(picks); i++ {
			p := picks[i]
			if p < 128 || i+1 == len(picks) {
				b.WriteRune(runeMenu[int(p)%len(runeMenu)])
				continue
			}
			i++
			b.WriteRune(rune(p&0x7f)<<10 | rune(picks[i])<<2 | rune(p>>5&3))
		}
		splitAgrees(t, b.String())
	})
}
