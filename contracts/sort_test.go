package contracts

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// Violations are listed by path, compared segment by segment with array
// indexes compared as numbers and before names (so /l/2 comes before
// /l/10, and /l/10 before /l/a), a path before the paths under it; then
// by kind, rule and message; exact duplicates are dropped. Whatever order
// they are found in, the list is the same.
func TestSortViolationsOrder(t *testing.T) {
	want := []Violation{
		{Kind: KindParse, Path: "", Rule: RuleNotJSON, Message: "m"},
		{Kind: KindSchema, Path: "", Rule: "required", Message: `required property "a" is missing`},
		{Kind: KindSchema, Path: "", Rule: "required", Message: `required property "b" is missing`},
		{Kind: KindUpstream, Path: "", Rule: RuleModelRefusal, Message: "m"},
		{Kind: KindUpstream, Path: "", Rule: RuleOutputTruncated, Message: "m"},
		{Kind: KindSchema, Path: "/l", Rule: "minItems", Message: "m"},
		{Kind: KindSchema, Path: "/l/2", Rule: "enum", Message: "m"},
		{Kind: KindPolicy, Path: "/l/10", Rule: "label", Message: "m"},
		{Kind: KindSchema, Path: "/l/10", Rule: "enum", Message: "m"},
		{Kind: KindSchema, Path: "/l/10/a", Rule: "type", Message: "m"},
		{Kind: KindSchema, Path: "/l/a", Rule: "type", Message: "m"},
		{Kind: KindSchema, Path: "/l/b", Rule: "type", Message: "m"},
		{Kind: KindSchema, Path: "/m", Rule: "type", Message: "m"},
		{Kind: KindPolicy, Path: "/m/0", Rule: "forbidden:a", Message: "m"},
		{Kind: KindPolicy, Path: "/m/0", Rule: "forbidden:b", Message: "m"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		in := append([]Violation{}, want...)
		in = append(in, want[3], want[8]) // exact duplicates
		rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		if got := SortViolations(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d:\n got %v\nwant %v", round, got, want)
		}
	}
	for _, tc := range []struct {
		a, b string
		want int // sign
	}{
		{"", "/a", -1},
		{"/2", "/10", -1},
		{"/10", "/a", -1},
		{"/a", "/a/0", -1},
		{"/a/0", "/b", -1},
		{"/9/z", "/10/a", -1},
		{"/x~1y", "/x~1y", 0},
	} {
		got := ComparePointers(tc.a, tc.b)
		if cmpSign(got) != tc.want || cmpSign(ComparePointers(tc.b, tc.a)) != -tc.want {
			t.Errorf("ComparePointers(%q, %q) = %d, want sign %d (and the reverse)", tc.a, tc.b, got, tc.want)
		}
	}
}

func cmpSign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
