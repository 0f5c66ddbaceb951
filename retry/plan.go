package retry

import (
	"fmt"
	"math"
)

// Keep says which part of a text a shortening keeps.
type Keep string

const (
	// KeepHead keeps the beginning of the text.
	KeepHead Keep = "head"
	// KeepHeadTail keeps the beginning and the end, joined by Ellipsis.
	KeepHeadTail Keep = "head_tail"
)

// Valid reports whether k is a known keep mode. The empty Keep is valid
// and means KeepHead, so a config may omit `keep`.
func (k Keep) Valid() bool {
	return k == "" || k == KeepHead || k == KeepHeadTail
}

// Shorten is an attempt's `shorten` setting: cut client content to Ratio
// of its tokens, keeping the part named by Keep.
type Shorten struct {
	Ratio float64
	Keep  Keep
}

// Validate checks 0 < Ratio <= 1 and a known Keep (empty means head).
// Ratio 1 is allowed: it keeps each text whole, yet the attempt still
// drops earlier turns and caps the last user message at max_input_tokens,
// which is a useful retry on its own.
func (s Shorten) Validate() error {
	if math.IsNaN(s.Ratio) || s.Ratio <= 0 || s.Ratio > 1 {
		return fmt.Errorf("shorten.ratio must be greater than 0 and at most 1, got %v", s.Ratio)
	}
	if !s.Keep.Valid() {
		return fmt.Errorf("shorten.keep must be %q or %q, got %q", KeepHead, KeepHeadTail, string(s.Keep))
	}
	return nil
}

// Attempt is one entry of a route's retry plan (config checks its
// temperature). Temperature is sent exactly; a nil Shorten sends the
// content as attempt 1 did.
type Attempt struct {
	Temperature float64
	Shorten     *Shorten
}

// DefaultPlan is the plan of a route that omits `retry`: attempt 1 at the
// route's temperature, attempt 2 at temperature 0 with the input cut to
// half its tokens, head kept. Each call returns fresh values.
func DefaultPlan(temperature float64) []Attempt {
	return []Attempt{
		{Temperature: temperature},
		{Temperature: 0, Shorten: &Shorten{Ratio: 0.5, Keep: KeepHead}},
	}
}

// Budget is a route's `budget`. Zero in either field means no limit.
type Budget struct {
	MaxInputTokens int
	MaxTotalTokens int
}

// InputTooLarge reports whether attempt 1's offline input count exceeds
// MaxInputTokens (input_too_large). Equal is allowed.
func (b Budget) InputTooLarge(attempt1Input int) bool {
	return b.MaxInputTokens > 0 && attempt1Input > b.MaxInputTokens
}

// Exhausted is the check made before each attempt (budget_exhausted):
// whether the tokens already spent plus this attempt's input and its
// max_output_tokens would exceed MaxTotalTokens. Equal is allowed.
func (b Budget) Exhausted(spent, input, maxOutput int) bool {
	if b.MaxTotalTokens <= 0 {
		return false
	}
	// Summed in int64 so absurd inputs cannot wrap around on 32-bit
	// platforms and pass the check.
	return int64(spent)+int64(input)+int64(maxOutput) > int64(b.MaxTotalTokens)
}
