package contracts

import (
	"slices"
	"strings"
)

// Violation kinds.
const (
	KindParse    = "parse"
	KindSchema   = "schema"
	KindPolicy   = "policy"
	KindUpstream = "upstream"
)

// Parse rule ids.
const (
	RuleEmptyOutput     = "empty_output"
	RuleNotJSON         = "not_json"
	RuleMarkdownFence   = "markdown_fence"
	RuleProseAroundJSON = "prose_around_json"
	RuleTopLevelNotObj  = "top_level_not_object"
	RuleDuplicateKey    = "duplicate_key"
	RuleInvalidUTF8     = "invalid_utf8"
	RuleTooDeep         = "too_deep"
	RuleTooLarge        = "too_large"
	RuleOutputTruncated = "output_truncated"
	RuleModelRefusal    = "model_refusal"
)

// Violation is one reason an output was rejected. Path is a JSON Pointer into
// the output ("" for the whole); Rule is a stable identifier users match on.
type Violation struct {
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// Evidence locates one evidence snippet in its source text. Start and End are
// offsets in Unicode code points (End exclusive); SHA256 is the hex digest of
// the snippet's UTF-8 bytes.
type Evidence struct {
	Path   string `json:"path"`
	Start  int    `json:"start"`
	End    int    `json:"end"`
	SHA256 string `json:"sha256"`
}

// SortViolations orders vs by path (segment by segment, array indexes
// numerically and before names), then kind, rule and message, and drops exact
// duplicates, so the same output always yields the same list.
func SortViolations(vs []Violation) []Violation {
	slices.SortFunc(vs, CompareViolations)
	return slices.Compact(vs)
}

// CompareViolations is the total order of SortViolations.
func CompareViolations(a, b Violation) int {
	if c := ComparePointers(a.Path, b.Path); c != 0 {
		return c
	}
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Rule, b.Rule); c != 0 {
		return c
	}
	return strings.Compare(a.Message, b.Message)
}
