package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// QuestionPolicy bounds the number of question marks ("?" and the fullwidth
// "？") in each value at its path, each value judged alone (rule
// "questions"): either exactly N or at most N.
//
// Definitions the spec leaves open:
//   - A non-string value counts as zero question marks (a null "question"
//     asks nothing), so it fails "exactly N" for N ≥ 1 and passes "max".
//   - When the path matches nothing and "exactly" is 1 or more, the required
//     question is missing: one violation whose path is the deepest existing
//     node on the path's literal prefix (the tokens before the first "*"),
//     i.e. the object or array the question should have been in; "" when
//     not even the first token exists. "exactly: 0" and "max" pass.
//   - Only a path matching nothing at all is "missing": with "*" in the
//     path, one element lacking the field while another has it is the
//     schema's business ("required").
type QuestionPolicy struct {
	path  Path
	n     int
	exact bool
}

// NewQuestions builds a question policy; exactly one of exactly and max must
// be set, and it must not be negative.
func NewQuestions(path string, exactly *int, max *int) (contracts.Policy, error) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, err
	}
	q := &QuestionPolicy{path: p}
	switch {
	case (exactly == nil) == (max == nil):
		return nil, errors.New(`set exactly one of "exactly" and "max"`)
	case exactly != nil:
		if *exactly < 0 {
			return nil, fmt.Errorf(`"exactly" must be 0 or more, got %d`, *exactly)
		}
		q.n, q.exact = *exactly, true
	default:
		if *max < 0 {
			return nil, fmt.Errorf(`"max" must be 0 or more, got %d`, *max)
		}
		q.n = *max
	}
	return q, nil
}

// Check implements contracts.Policy.
func (q *QuestionPolicy) Check(out any, _ *contracts.Subject) ([]contracts.Violation, []contracts.Evidence) {
	var vs []contracts.Violation
	matched := false
	q.path.Walk(out, func(ptr []byte, v any) {
		matched = true
		s, isStr := v.(string)
		got := 0
		if isStr {
			got = countQuestionMarks(s)
		}
		var msg string
		switch {
		case q.exact && got != q.n && !isStr:
			msg = fmt.Sprintf("expected exactly %s, got %s", plural(q.n, "question mark", "question marks"), contracts.TypeName(v))
		case q.exact && got != q.n:
			msg = fmt.Sprintf("has %s, expected exactly %d", plural(got, "question mark", "question marks"), q.n)
		case !q.exact && got > q.n:
			msg = fmt.Sprintf("has %s, at most %d allowed", plural(got, "question mark", "question marks"), q.n)
		default:
			return
		}
		vs = append(vs, contracts.Violation{Kind: contracts.KindPolicy, Path: string(ptr), Rule: RuleQuestions, Message: msg})
	})
	if !matched && q.exact && q.n > 0 {
		vs = append(vs, contracts.Violation{
			Kind:    contracts.KindPolicy,
			Path:    q.path.deepestExisting(out),
			Rule:    RuleQuestions,
			Message: fmt.Sprintf("nothing at %s, expected exactly %s there", q.path.String(), plural(q.n, "question mark", "question marks")),
		})
	}
	return contracts.SortViolations(vs), nil
}

func countQuestionMarks(s string) int {
	return strings.Count(s, "?") + strings.Count(s, "？")
}

// OutputPath implements contracts.PathPolicy: Check reads the output only
// along its path (deepestExisting follows literal tokens of the same walk).
func (q *QuestionPolicy) OutputPath() ([]string, []bool) { return q.path.tokensWild() }
