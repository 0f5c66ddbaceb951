package retry

import (
	"math"
	"reflect"
	"testing"
)

func TestDefaultPlan(t *testing.T) {
	got := DefaultPlan(0.7)
	want := []Attempt{
		{Temperature: 0.7},
		{Temperature: 0, Shorten: &Shorten{Ratio: 0.5, Keep: KeepHead}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DefaultPlan(0.7) = %+v, want %+v", got, want)
	}
	for i, a := range got {
		if a.Shorten != nil {
			if err := a.Shorten.Validate(); err != nil {
				t.Errorf("attempt %d invalid: %v", i+1, err)
			}
		}
	}
	// Fresh values each call: a caller editing its plan must not change
	// another route's.
	got[1].Shorten.Ratio = 0.9
	if again := DefaultPlan(0.7); again[1].Shorten.Ratio != 0.5 {
		t.Fatalf("DefaultPlan shares its Shorten between calls")
	}
	if p := DefaultPlan(0); p[0].Temperature != 0 || p[1].Temperature != 0 {
		t.Fatalf("DefaultPlan(0) = %+v", p)
	}
}

func TestShortenValidate(t *testing.T) {
	tests := []struct {
		name string
		s    Shorten
		ok   bool
	}{
		{"half head", Shorten{0.5, KeepHead}, true},
		{"half head_tail", Shorten{0.5, KeepHeadTail}, true},
		{"keep omitted means head", Shorten{0.5, ""}, true},
		{"ratio one keeps whole", Shorten{1, KeepHead}, true},
		{"tiny ratio", Shorten{0.001, KeepHead}, true},
		{"ratio zero", Shorten{0, KeepHead}, false},
		{"negative ratio", Shorten{-0.5, KeepHead}, false},
		{"ratio above one", Shorten{1.01, KeepHead}, false},
		{"NaN ratio", Shorten{math.NaN(), KeepHead}, false},
		{"infinite ratio", Shorten{math.Inf(1), KeepHead}, false},
		{"unknown keep", Shorten{0.5, "tail"}, false},
		{"keep is case-sensitive", Shorten{0.5, "Head"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", tt.s, err, tt.ok)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	tests := []struct {
		name                     string
		b                        Budget
		spent, input, maxOut     int
		wantExhausted, wantLarge bool
	}{
		{"unlimited", Budget{}, 1 << 40, 1 << 40, 1 << 40, false, false},
		{"under", Budget{MaxInputTokens: 100, MaxTotalTokens: 1000}, 100, 50, 800, false, false},
		{"exactly equal is allowed", Budget{MaxInputTokens: 50, MaxTotalTokens: 950}, 100, 50, 800, false, false},
		{"one over", Budget{MaxInputTokens: 49, MaxTotalTokens: 949}, 100, 50, 800, true, true},
		{"first attempt, nothing spent", Budget{MaxTotalTokens: 850}, 0, 50, 800, false, false},
		{"first attempt over", Budget{MaxTotalTokens: 849}, 0, 50, 800, true, false},
		{"only input limited", Budget{MaxInputTokens: 10}, 1 << 40, 11, 1 << 40, false, true},
		{"only total limited", Budget{MaxTotalTokens: 10}, 0, 11, 0, true, false},
		{"no overflow wrap", Budget{MaxTotalTokens: 10}, math.MaxInt, math.MaxInt, math.MaxInt, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Exhausted(tt.spent, tt.input, tt.maxOut); got != tt.wantExhausted {
				t.Errorf("Exhausted(%d, %d, %d) = %v, want %v", tt.spent, tt.input, tt.maxOut, got, tt.wantExhausted)
			}
			if got := tt.b.InputTooLarge(tt.input); got != tt.wantLarge {
				t.Errorf("InputTooLarge(%d) = %v, want %v", tt.input, got, tt.wantLarge)
			}
		})
	}
}
