package retry

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// wordCounter counts one token per whitespace-separated field, which
// makes expected cuts easy to read.
type wordCounter struct{}

func (wordCounter) Count(s string) int { return len(strings.Fields(s)) }

func words(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = "w" + string(rune('a'+i%26))
	}
	return strings.Join(w, " ")
}

func TestCutTarget(t *testing.T) {
	tests := []struct {
		n         int
		ratio     float64
		maxTokens int
		want      int
	}{
		{10, 0.5, 0, 5},
		{5, 0.5, 0, 3},   // rounds up
		{1, 0.5, 0, 1},   // a one-token text is never emptied by a ratio
		{10, 0.7, 0, 7},  // 0.7*10 is 7.000000000000001 in float64
		{10, 0.3, 0, 3},  // 0.3*10 is 3.0000000000000004
		{10, 0.5, 3, 3},  // cap smaller than ratio
		{10, 0.5, 8, 5},  // cap larger than ratio
		{10, 1, 0, 10},   // ratio 1: no ratio limit
		{10, 0, 4, 4},    // ratio 0: cap only
		{10, 1.5, 0, 10}, // out of range: no ratio limit
		{10, math.NaN(), 0, 10},
		{10, 0.5, -1, 5}, // negative cap: no cap
		{0, 0.5, 0, 0},
	}
	for _, tt := range tests {
		if got := cutTarget(tt.n, tt.ratio, tt.maxTokens); got != tt.want {
			t.Errorf("cutTarget(%d, %v, %d) = %d, want %d", tt.n, tt.ratio, tt.maxTokens, got, tt.want)
		}
	}
}

// cutCase is one Cut call and the text it must leave.
type cutCase struct {
	name      string
	text      string
	ratio     float64
	maxTokens int
	keep      Keep
	want      string
}

// runCuts runs each case through Cut with counter.
func runCuts(t *testing.T, counter Counter, tests []cutCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cut(tt.text, tt.ratio, tt.maxTokens, tt.keep, counter)
			if got != tt.want {
				t.Fatalf("Cut(%q, %v, %d, %q) = %q, want %q", tt.text, tt.ratio, tt.maxTokens, tt.keep, got, tt.want)
			}
		})
	}
}

func TestCutWordCounter(t *testing.T) {
	runCuts(t, wordCounter{}, []cutCase{
		{"head half", "one two three four", 0.5, 0, KeepHead, "one two"},
		{"keep empty means head", "one two three four", 0.5, 0, "", "one two"},
		{"rounds up", "one two three four five", 0.5, 0, KeepHead, "one two three"},
		{"inner whitespace kept", "one\n\ntwo\tthree four five six", 0.5, 0, KeepHead, "one\n\ntwo\tthree"},
		{"outer whitespace dropped", "  one two three four  \n", 0.5, 0, KeepHead, "one two"},
		{"ratio one is a no-op", "  one two three  ", 1, 0, KeepHead, "  one two three  "},
		{"within cap is a no-op", "one two three", 0, 3, KeepHead, "one two three"},
		{"cap smaller than ratio", words(10), 0.5, 3, KeepHead, "wa wb wc"},
		{"cap larger than ratio", words(10), 0.5, 8, KeepHead, "wa wb wc wd we"},
		{"cap alone", words(10), 0, 2, KeepHead, "wa wb"},
		{"empty", "", 0.5, 0, KeepHead, ""},
		{"empty with cap", "", 0, 1, KeepHeadTail, ""},
		{"single word kept by rounding", "supercalifragilistic", 0.5, 0, KeepHead, "supercalifragilistic"},
		{"head_tail", words(10), 0.5, 0, KeepHeadTail, "wa wb … wi wj"},
		// target 5, ellipsis 1: head 2, tail 2
		{"head_tail odd", words(9), 0.5, 0, KeepHeadTail, "wa wb … wh wi"},
		// target 6, ellipsis 1: head ceil(5/2)=3, tail 2
		{"head_tail uneven", words(12), 0.5, 0, KeepHeadTail, "wa wb wc … wk wl"},
		{"head_tail keeps inner whitespace", "a\nb c d e f g h i\tj", 0.5, 0, KeepHeadTail, "a\nb … i\tj"},
		// target 2 leaves 1 token beside the ellipsis: not a word per side
		{"head_tail too small falls back to head", "one two three four", 0.5, 0, KeepHeadTail, "one two"},
		{"unicode words", "héllo wörld ünïcode façade", 0.5, 0, KeepHead, "héllo wörld"},
		{"unicode head_tail", "α β γ δ ε ζ η θ ι κ", 0.5, 0, KeepHeadTail, "α β … ι κ"},
	})
}

func TestCutEstimator(t *testing.T) {
	huge := strings.Repeat("x", 1000)
	runCuts(t, Estimator{}, []cutCase{
		// 250 tokens, target 125: the only word does not fit, and a cut
		// never ends inside a word.
		{"single huge word", huge, 0.5, 0, KeepHead, ""},
		{"single huge word head_tail", huge, 0.5, 0, KeepHeadTail, ""},
		{"huge first word", huge + " and then some", 0.5, 0, KeepHead, ""},
		// 16 bytes = 4 tokens, target 2: "abc def" is 7 bytes = 2 tokens.
		{"estimator head", "abc def ghi jklm", 0.5, 0, KeepHead, "abc def"},
		// Each ideograph is a word: 7 × 3 bytes = 6 tokens, target 3,
		// and 4 ideographs (12 bytes) are 3 tokens.
		{"CJK cut between ideographs", "我们今天去公园", 0.5, 0, KeepHead, "我们今天"},
		{"whitespace only over the cap", "        ", 0, 1, KeepHead, ""},
	})
}

const prose = `The storm last Tuesday broke the large window in our living room. ` +
	`Glass covered the floor and rain came in for several hours before we could cover it. ` +
	"Our neighbour helped us tape plastic sheeting over the frame.\n\n" +
	`We would like to know whether the policy covers the window, the damaged carpet, ` +
	`and the cost of the emergency glazier who came on Wednesday morning. ` +
	`Could you also tell us how long a claim usually takes?`

func TestCutBPE(t *testing.T) {
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		c := CounterFor(model)
		n := c.Count(prose)
		for _, keep := range []Keep{KeepHead, KeepHeadTail} {
			for _, ratio := range []float64{0.1, 0.25, 0.5, 0.9} {
				got := Cut(prose, ratio, 0, keep, c)
				target := cutTarget(n, ratio, 0)
				if gc := c.Count(got); gc > target {
					t.Errorf("%s %s %v: %d tokens > target %d: %q", model, keep, ratio, gc, target, got)
				}
				checkWholeWords(t, prose, got)
				if keep == KeepHead {
					// Longest: one more word would not fit.
					ws := strings.Fields(prose)
					k := len(strings.Fields(got))
					longer := (&cutter{text: prose, ws: splitWords(prose), c: c}).head(k + 1)
					if k < len(ws) && c.Count(longer) <= target {
						t.Errorf("%s %v: %q is not the longest fit (%q has %d <= %d)", model, ratio, got, longer, c.Count(longer), target)
					}
				} else if !strings.Contains(got, Ellipsis) {
					t.Errorf("%s %v: head_tail without ellipsis: %q", model, ratio, got)
				}
			}
		}
	}
	c := CounterFor("gpt-4o")
	if got := Cut(prose, 0.5, 0, KeepHead, c); !strings.HasPrefix(got, "The storm last Tuesday") || strings.HasSuffix(got, " ") {
		t.Errorf("head cut = %q", got)
	}
	if got := Cut(prose, 0.5, 0, KeepHeadTail, c); !strings.HasSuffix(got, "how long a claim usually takes?") {
		t.Errorf("head_tail cut = %q", got)
	}
	if got := Cut(prose, 0.5, 10, KeepHead, c); c.Count(got) > 10 || c.Count(got) < 8 {
		t.Errorf("cap 10: %q has %d tokens", got, c.Count(got))
	}
}

func TestCutDeterministic(t *testing.T) {
	c := CounterFor("gpt-4o")
	text := strings.Repeat(prose+"\n", 2) + "我们今天去公园。"
	for _, keep := range []Keep{KeepHead, KeepHeadTail} {
		first := Cut(text, 0.37, 0, keep, c)
		for i := 0; i < 100; i++ {
			if got := Cut(text, 0.37, 0, keep, c); got != first {
				t.Fatalf("%s run %d differs:\n%q\n%q", keep, i, got, first)
			}
		}
	}
}

// A counter with a large penalty for joined text: the verification loop
// must still keep head_tail within the target.
type joinPenalty struct{}

func (joinPenalty) Count(s string) int {
	n := len(strings.Fields(s))
	if strings.Contains(s, "…") {
		n += 3
	}
	return n
}

func TestCutNonAdditiveCounter(t *testing.T) {
	text := words(20)
	got := Cut(text, 0.5, 0, KeepHeadTail, joinPenalty{})
	if c := (joinPenalty{}).Count(got); c > 10 {
		t.Fatalf("Cut = %q with %d tokens > 10", got, c)
	}
	checkWholeWords(t, text, got)
}

func TestCutLarge(t *testing.T) {
	c := CounterFor("gpt-4o")
	text := strings.Repeat(prose+"\n", 100*1024/len(prose)+1) // > 100 KB
	n := c.Count(text)
	for _, keep := range []Keep{KeepHead, KeepHeadTail} {
		got := Cut(text, 0.5, 0, keep, c)
		if gc := c.Count(got); gc > cutTarget(n, 0.5, 0) || gc < cutTarget(n, 0.5, 0)-50 {
			t.Errorf("%s: %d tokens for target %d", keep, gc, cutTarget(n, 0.5, 0))
		}
		checkWholeWords(t, text, got)
	}
}

func TestShortenInput(t *testing.T) {
	build := func() map[string]any {
		return map[string]any{
			"subject": "Broken window",
			"body":    "one two three four five six seven eight",
			"count":   3.0,
			"urgent":  true,
			"none":    nil,
			"meta": map[string]any{
				"note": "alpha beta gamma delta",
				"tags": []any{"first second third fourth", 7.0, map[string]any{"deep": "a b c d"}},
			},
			"empty": "",
		}
	}
	in := build()
	got := ShortenInput(in, Shorten{Ratio: 0.5, Keep: KeepHead}, wordCounter{})
	want := map[string]any{
		"subject": "Broken",
		"body":    "one two three four",
		"count":   3.0,
		"urgent":  true,
		"none":    nil,
		"meta": map[string]any{
			"note": "alpha beta",
			"tags": []any{"first second", 7.0, map[string]any{"deep": "a b"}},
		},
		"empty": "",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ShortenInput =\n%#v\nwant\n%#v", got, want)
	}
	if !reflect.DeepEqual(in, build()) {
		t.Fatalf("ShortenInput modified its input: %#v", in)
	}
	// The result shares nothing mutable with the input.
	got["meta"].(map[string]any)["tags"].([]any)[0] = "changed"
	got["meta"].(map[string]any)["note"] = "changed"
	if !reflect.DeepEqual(in, build()) {
		t.Fatalf("result aliases input: %#v", in)
	}

	ht := ShortenInput(map[string]any{"body": words(10)}, Shorten{Ratio: 0.5, Keep: KeepHeadTail}, wordCounter{})
	if ht["body"] != "wa wb … wi wj" {
		t.Fatalf("head_tail body = %q", ht["body"])
	}
	if ShortenInput(nil, Shorten{Ratio: 0.5}, wordCounter{}) != nil {
		t.Fatalf("ShortenInput(nil) is not nil")
	}
}

// checkWholeWords fails unless got is "", or whole words of text taken
// from its first word on (head), optionally followed by Ellipsis and whole
// words ending at text's last word (tail), the tail after the head.
// Words are checked without the package's splitter: a boundary is
// whitespace, the text's ends, or either side of an ideograph.
func checkWholeWords(t testing.TB, text, got string) {
	t.Helper()
	if got == "" || got == text {
		return
	}
	if headEnd, ok := validHead(text, got); ok && headEnd > 0 {
		return
	}
	for i := 0; ; {
		j := strings.Index(got[i:], Ellipsis)
		if j < 0 {
			break
		}
		h, tl := got[:i+j], got[i+j+len(Ellipsis):]
		headEnd, okH := validHead(text, h)
		tailStart, okT := validTail(text, tl)
		if okH && okT && h != "" && tl != "" && headEnd <= tailStart {
			return
		}
		i += j + 1
	}
	t.Fatalf("not whole words of the input:\ntext %q\ngot  %q", text, got)
}

func isIdeo(r rune) bool { return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) }

func runeAt(s string, i int) rune     { r, _ := utf8.DecodeRuneInString(s[i:]); return r }
func runeBefore(s string, i int) rune { r, _ := utf8.DecodeLastRuneInString(s[:i]); return r }
func boundaryAt(s string, i int) bool {
	return i == 0 || i == len(s) || unicode.IsSpace(runeAt(s, i)) || unicode.IsSpace(runeBefore(s, i)) || isIdeo(runeAt(s, i)) || isIdeo(runeBefore(s, i))
}
func firstNonSpace(s string) int    { return len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace)) }
func lastNonSpaceEnd(s string) int  { return len(strings.TrimRightFunc(s, unicode.IsSpace)) }
func trimmedEnds(piece string) bool { return piece == strings.TrimSpace(piece) }
func validHead(text, h string) (int, bool) {
	a := firstNonSpace(text)
	if !trimmedEnds(h) || !strings.HasPrefix(text[a:], h) {
		return 0, false
	}
	end := a + len(h)
	return end, boundaryAt(text, end)
}
func validTail(text, tl string) (int, bool) {
	b := lastNonSpaceEnd(text)
	if !trimmedEnds(tl) || !strings.HasSuffix(text[:b], tl) {
		return 0, false
	}
	start := b - len(tl)
	return start, boundaryAt(text, start)
}

func FuzzCut(f *testing.F) {
	f.Add("one two three four", 0.5, 0, false, false)
	f.Add(prose, 0.5, 0, true, true)
	f.Add(prose, 0.2, 7, false, true)
	f.Add("我们今天去公园。天气很好！", 0.5, 0, true, true)
	f.Add("  a\n\nb\tc  ", 0.3, 0, true, false)
	f.Add(strings.Repeat("x", 300)+" y", 0.5, 0, false, true)
	f.Add("end.\n\nNext line, \"quoted\" (paren) 1234567 x/y/z", 0.4, 0, true, true)
	f.Add("\xff\xfe bad \xe4\xbd utf8 \xe4\xbd\xa0", 0.5, 2, true, true)
	f.Add("a … b … c … d … e … f", 0.7, 0, true, true)
	bpe := CounterFor("gpt-4o")
	f.Fuzz(func(t *testing.T, text string, ratio float64, maxTokens int, headTail, useBPE bool) {
		var c Counter = Estimator{}
		if useBPE {
			c = bpe
		}
		keep := KeepHead
		if headTail {
			keep = KeepHeadTail
		}
		got := Cut(text, ratio, maxTokens, keep, c)
		n := c.Count(text)
		target := cutTarget(n, ratio, maxTokens)
		if n <= target {
			if got != text {
				t.Fatalf("within target %d but changed: %q -> %q", target, text, got)
			}
			return
		}
		if gc := c.Count(got); gc > target {
			t.Fatalf("%d tokens > target %d: %q -> %q", gc, target, text, got)
		}
		checkWholeWords(t, text, got)
		if again := Cut(text, ratio, maxTokens, keep, c); again != got {
			t.Fatalf("not deterministic: %q vs %q", got, again)
		}
	})
}
