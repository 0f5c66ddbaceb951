package retry

import (
	"math"
	"unicode"
	"unicode/utf8"
)

// Ellipsis joins the head and the tail of a head_tail cut.
const Ellipsis = " … "

// Cut shortens text to a token target, cutting only at word boundaries.
//
// The target is ceil(ratio × Count(text)), lowered to maxTokens when
// 0 < maxTokens < that. A ratio outside (0, 1), or NaN, sets no ratio
// limit, and maxTokens <= 0 sets no cap, so Cut(text, 1, 0, …) returns
// text. Rounding up means a one-token text is never emptied by a ratio.
//
// Text whose count is within the target is returned unchanged. Otherwise
// the result is the longest run of whole words that fits:
//   - KeepHead (and "", or any unknown value): the text from its first
//     word to the end of the last word that fits;
//   - KeepHeadTail: the target less the count of Ellipsis is split in
//     two, the head getting the larger half when it is odd; the head is
//     cut from the start, the tail from the end gets what the head left
//     unused, and the two are joined by Ellipsis. When the target cannot
//     hold a word on each side as well as Ellipsis, it falls back to
//     KeepHead.
//
// A word is a maximal run of non-space characters, except that each Han,
// Hiragana or Katakana character is a word of its own, as in Unicode text
// segmentation, so CJK text can be cut too. Scripts written without spaces
// (Thai, for one) are cut only at whitespace. Leading and trailing
// whitespace is not kept, and the whitespace between kept words is kept
// as it was.
//
// The result's count never exceeds the target. When not even the first
// word fits, the result is "": a cut never ends inside a word and never
// sends more than it was allowed to. Cut is deterministic for a
// deterministic Counter.
//
// Cost: one count of text, one counting pass over the part kept (in
// blocks of about √words words, then a binary search in the block where
// the target falls), and one count of the result to confirm it: about
// twice the cost of counting text.
func Cut(text string, ratio float64, maxTokens int, keep Keep, c Counter) string {
	if text == "" {
		return ""
	}
	n := c.Count(text)
	target := cutTarget(n, ratio, maxTokens)
	if n <= target {
		return text
	}
	x := &cutter{text: text, ws: splitWords(text), c: c}
	if len(x.ws) == 0 || target <= 0 {
		return ""
	}
	if keep == KeepHeadTail {
		if s, ok := x.headTail(target); ok {
			return s
		}
	}
	k, _ := x.longest(headSide, len(x.ws), target, true)
	return x.head(k)
}

func cutTarget(n int, ratio float64, maxTokens int) int {
	t := n
	if ratio > 0 && ratio < 1 {
		// The epsilon absorbs float error (0.7 × 10 is 7.000000000000001
		// in float64, which must round to 7, not 8).
		t = int(math.Ceil(ratio*float64(n) - 1e-9))
	}
	if maxTokens > 0 && maxTokens < t {
		t = maxTokens
	}
	return t
}

// word is the byte span [start, end) of one word of the text.
type word struct{ start, end int }

func splitWords(s string) []word {
	var ws []word
	start := -1
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case unicode.IsSpace(r):
			if start >= 0 {
				ws = append(ws, word{start, i})
				start = -1
			}
		case isIdeographic(r):
			if start >= 0 {
				ws = append(ws, word{start, i})
				start = -1
			}
			ws = append(ws, word{i, i + size})
		default:
			if start < 0 {
				start = i
			}
		}
		i += size
	}
	if start >= 0 {
		ws = append(ws, word{start, len(s)})
	}
	return ws
}

func isIdeographic(r rune) bool {
	if r < 0x2E80 { // below the first CJK block: the common case, fast
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

type side int

const (
	headSide side = iota
	tailSide
)

type cutter struct {
	text string
	ws   []word
	c    Counter
}

// head is the text of the first k words.
func (x *cutter) head(k int) string {
	if k <= 0 {
		return ""
	}
	return x.text[x.ws[0].start:x.ws[k-1].end]
}

// tail is the text of the last k words.
func (x *cutter) tail(k int) string {
	if k <= 0 {
		return ""
	}
	w := len(x.ws)
	return x.text[x.ws[w-k].start:x.ws[w-1].end]
}

// span is the text of the words r0..r1-1 counted from side's end, with
// the whitespace before the earliest of them in the text. Spans therefore
// split the text just after a word, never just before one: BPE
// pre-tokenizers attach a space to the word that follows it (" word"), so
// counts add up across such splits. Consecutive head spans concatenate to
// exactly a head; tail spans to a tail with its leading whitespace, which
// is at most a token more than the tail alone.
func (x *cutter) span(sd side, r0, r1 int) string {
	if r0 >= r1 {
		return ""
	}
	a, b := r0, r1 // words a..b-1 of the text
	if sd == tailSide {
		a, b = len(x.ws)-r1, len(x.ws)-r0
	}
	from := x.ws[0].start
	if a > 0 {
		from = x.ws[a-1].end
	}
	return x.text[from:x.ws[b-1].end]
}

func (x *cutter) prefix(sd side, k int) string {
	if sd == headSide {
		return x.head(k)
	}
	return x.tail(k)
}

// longest finds the largest k <= limit such that the first k words from
// side's end count at most budget, and returns k and that count. With
// verify, only a k whose prefix was counted in full is returned, so the
// bound holds for any Counter; the search assumes counts grow with k (true
// of tokenizers in practice) only to be fast and to find the longest.
// Without verify, k and used are the block-sum estimate, for a caller that
// counts the final text itself.
func (x *cutter) longest(sd side, limit, budget int, verify bool) (k, used int) {
	if limit <= 0 || budget <= 0 {
		return 0, 0
	}
	count := func(k int) int { return x.c.Count(x.prefix(sd, k)) }

	// Estimate by summing block counts: for BPE tokenizers a prefix's
	// count is, almost always, the sum of its blocks' counts (their
	// pre-tokenizers do not merge across a space after a word), so this
	// lands on the answer without counting the prefix over and over.
	bs := blockSize(limit)
	r, cum := 0, 0
	for r < limit {
		e := min(r+bs, limit)
		cc := x.c.Count(x.span(sd, r, e))
		if cum+cc > budget {
			// Binary search inside the block: largest e with
			// cum + count(span(r, e)) <= budget.
			lo, hi, loCount := r, e, 0
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if mc := x.c.Count(x.span(sd, r, mid)); cum+mc <= budget {
					lo, loCount = mid, mc
				} else {
					hi = mid
				}
			}
			r, cum = lo, cum+loCount
			break
		}
		r, cum = e, cum+cc
	}

	if !verify {
		return r, cum
	}
	// Confirm with a full count. The loops below only run when the
	// counter did not add up across a split (Estimator's rounding, or a
	// BPE piece such as "?\n" that spans a block boundary); each corrects
	// by counting just the words at the edge, then counts the whole again.
	k = r
	used = count(k)
	// Too long: drop about as many words as the excess. k falls every
	// round and k = 0 always fits.
	for used > budget {
		k -= x.dropFor(sd, k, used-budget)
		used = 0
		if k > 0 {
			used = count(k)
		}
	}
	// Too short: add the words that the slack seems to hold.
	for round := 0; round < maxGrowRounds && k < limit; round++ {
		j := x.addFor(sd, k, limit, budget-used)
		if j == 0 {
			break
		}
		if nu := count(k + j); nu <= budget {
			k, used = k+j, nu
			continue
		}
		k, used = x.bisect(count, budget, k, used, k+j)
		break
	}
	return k, used
}

// maxGrowRounds bounds the full counts spent recovering slack; the result
// is a verified fit whenever the loop stops.
const maxGrowRounds = 4

// dropFor returns the smallest j in [1, k] such that the last j of the
// first k words count at least need (need > 0), or k.
func (x *cutter) dropFor(sd side, k, need int) int {
	enough := func(j int) bool { return x.c.Count(x.span(sd, k-j, k)) >= need }
	lo, hi := 0, 1 // j = lo is not enough; j = hi is, or hi = k
	for hi < k && !enough(hi) {
		lo, hi = hi, min(2*hi, k)
	}
	return lastFit(lo, hi, func(j int) bool { return !enough(j) }) + 1
}

// addFor returns the largest j in [0, limit-k] such that words k..k+j-1
// count at most slack.
func (x *cutter) addFor(sd side, k, limit, slack int) int {
	if slack <= 0 {
		return 0
	}
	fits := func(j int) bool { return x.c.Count(x.span(sd, k, k+j)) <= slack }
	m := limit - k
	lo, hi := 0, 1 // j = lo fits; j = hi does not, or hi = m+1
	for hi <= m && fits(hi) {
		lo, hi = hi, 2*hi
	}
	return lastFit(lo, min(hi, m+1), fits)
}

// bisect narrows lo (fits, with count loUsed) and hi (does not fit) to
// adjacent values and returns the largest fitting one found.
func (x *cutter) bisect(count func(int) int, budget, lo, loUsed, hi int) (int, int) {
	k := lastFit(lo, hi, func(j int) bool {
		mu := count(j)
		if mu <= budget {
			loUsed = mu // the fits probed rise, so the last is k's count
		}
		return mu <= budget
	})
	return k, loUsed
}

// lastFit returns the largest j in [lo, hi) with fits(j), given fits(lo),
// !fits(hi) and fits true up to some j and false after it. It probes only
// strictly between lo and hi.
func lastFit(lo, hi int, fits func(int) bool) int {
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func blockSize(n int) int {
	b := int(math.Sqrt(float64(n)))
	if b < 16 {
		b = 16
	}
	return b
}

// headTail cuts to target keeping both ends; ok is false when the target
// cannot hold at least one word on each side plus Ellipsis.
func (x *cutter) headTail(target int) (string, bool) {
	avail := target - x.c.Count(Ellipsis)
	if avail < 2 {
		return "", false
	}
	w := len(x.ws)
	// Both sides are estimates; the joined text is counted below.
	kh, hc := x.longest(headSide, w-1, (avail+1)/2, false)
	if kh == 0 {
		return "", false
	}
	// The tail gets whatever the head's word granularity left unused.
	kt, _ := x.longest(tailSide, w-kh, avail-hc, false)
	for kh > 0 && kt > 0 {
		s := x.head(kh) + Ellipsis + x.tail(kt)
		if x.c.Count(s) <= target {
			return s, true
		}
		// Joining changed the count (a non-additive counter): give up a
		// word from the longer side and try again.
		if kt >= kh {
			kt--
		} else {
			kh--
		}
	}
	return "", false
}

// ShortenInput applies s to a contract_input object for a prompt with a
// `user` template: every string in input, at any depth (object members and
// array elements alike), is Cut to s.Ratio of its own tokens keeping
// s.Keep; numbers, booleans, nulls and keys are kept. The result is a new
// object sharing nothing mutable with input, which is never modified, so
// attempt 1's input stays as the client sent it (evidence and review use
// it). No max_input_tokens cap applies here: the rendered template, not
// each value, is what the budget sees.
func ShortenInput(input map[string]any, s Shorten, c Counter) map[string]any {
	if input == nil {
		return nil
	}
	return shortenValue(input, s, c).(map[string]any)
}

func shortenValue(v any, s Shorten, c Counter) any {
	switch t := v.(type) {
	case string:
		return Cut(t, s.Ratio, 0, s.Keep, c)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = shortenValue(e, s, c)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = shortenValue(e, s, c)
		}
		return out
	default:
		return v
	}
}
