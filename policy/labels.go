package policy

import (
	"fmt"

	"github.com/contractd/contractd/contracts"
)

// LabelPolicy requires every value at its path to be a string from one canonical
// label set (rule "label"). A non-string value is a violation too: a label
// that is not text cannot be canonical.
type LabelPolicy struct {
	path   Path
	set    string
	values map[string]struct{}
}

// NewLabels builds a label policy for the named set with the set's values.
func NewLabels(path string, setName string, values []string) (contracts.Policy, error) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, err
	}
	if setName == "" {
		return nil, fmt.Errorf("label set name must not be empty")
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("label set %q has no values", setName)
	}
	l := &LabelPolicy{path: p, set: setName, values: make(map[string]struct{}, len(values))}
	for _, v := range values {
		l.values[v] = struct{}{}
	}
	return l, nil
}

// Check implements contracts.Policy.
func (l *LabelPolicy) Check(out any, _ *contracts.Subject) ([]contracts.Violation, []contracts.Evidence) {
	var vs []contracts.Violation
	l.path.Walk(out, func(ptr []byte, v any) {
		s, ok := v.(string)
		var msg string
		switch {
		case !ok:
			msg = fmt.Sprintf("expected a label from set %q, got %s", l.set, contracts.TypeName(v))
		default:
			if _, known := l.values[s]; known {
				return
			}
			// Never quote the value: a 422 review must not carry output text.
			msg = fmt.Sprintf("value is not a label in set %q", l.set)
		}
		vs = append(vs, contracts.Violation{Kind: contracts.KindPolicy, Path: string(ptr), Rule: RuleLabel, Message: msg})
	})
	return contracts.SortViolations(vs), nil
}

// OutputPath implements contracts.PathPolicy: Check reads the output only
// along its path.
func (l *LabelPolicy) OutputPath() ([]string, []bool) { return l.path.tokensWild() }
