package contracts

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlclark/regexp2"
)

// The measurements behind the decision on ECMA-262 patterns Go's RE2
// cannot compile (docs/schema-agreement.md): what a backtracking engine
// with a match timeout (github.com/dlclark/regexp2, ECMAScript mode) costs
// per match on ordinary contract patterns (and how often its coarse
// timeout clock fires on them anyway), and what one hostile pattern costs
// per string under its timeout.

var regexCases = []struct{ name, pattern, input string }{
	{"slug", `^[a-z0-9_]{3,32}$`, "claim_report_2026"},
	{"date", `^\d{4}-\d{2}-\d{2}$`, "2026-11-25"},
	{"email-ish", `^[^@\s]+@[^@\s]+\.[a-z]{2,}$`, "jane.doe@example.co.uk"},
	{"sentence", `(?i)\b(policy|guideline)s?\b`, strings.Repeat("the storm broke my kitchen window last night ", 4)},
}

func BenchmarkPatternRE2(b *testing.B) {
	for _, c := range regexCases {
		re := regexp.MustCompile(c.pattern)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				re.MatchString(c.input)
			}
		})
	}
}

func BenchmarkPatternRegexp2(b *testing.B) { benchRegexp2(b, regexCases) }

// BenchmarkPatternRegexp2Lookahead: the constructs RE2 refuses, at their
// ordinary cost (a password-rule lookahead, a repeated-word backreference).
func BenchmarkPatternRegexp2Lookahead(b *testing.B) {
	benchRegexp2(b, []struct{ name, pattern, input string }{
		{"lookahead", `^(?=.*[A-Z])(?=.*\d)[A-Za-z\d]{8,}$`, "Passw0rdPassw0rd"},
		{"backreference", `\b(\w+)\s+\1\b`, "the storm broke my my window"},
	})
}

// benchRegexp2 matches each case under a 10 ms timeout and reports the
// timeouts, all spurious: these inputs match in microseconds.
func benchRegexp2(b *testing.B, cases []struct{ name, pattern, input string }) {
	for _, c := range cases {
		re := regexp2.MustCompile(c.pattern, regexp2.ECMAScript)
		re.MatchTimeout = 10 * time.Millisecond
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			timeouts := 0
			for b.Loop() {
				if _, err := re.MatchString(c.input); err != nil {
					timeouts++
				}
			}
			b.ReportMetric(float64(timeouts), "timeouts")
		})
	}
}

// BenchmarkPatternRegexp2Catastrophic: a nested quantifier on a string that
// almost matches. Every op runs until the match timeout; the result must
// be the timeout error (what a contract would have to treat as a
// violation, paying the timeout per string).
func BenchmarkPatternRegexp2Catastrophic(b *testing.B) {
	for _, timeout := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		re := regexp2.MustCompile(`^(a+)+$`, regexp2.ECMAScript)
		re.MatchTimeout = timeout
		input := strings.Repeat("a", 40) + "!"
		b.Run(timeout.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := re.MatchString(input); err == nil {
					b.Fatal("no timeout")
				}
			}
		})
	}
}

// BenchmarkPatternRE2Hostile: the same pattern and string through RE2
// (linear time: no timeout needed).
func BenchmarkPatternRE2Hostile(b *testing.B) {
	re := regexp.MustCompile(`^(a+)+$`)
	input := strings.Repeat("a", 40) + "!"
	for b.Loop() {
		if re.MatchString(input) {
			b.Fatal("match")
		}
	}
}
