package policy

import (
	"fmt"
	"regexp"

	"github.com/contractd/contractd/contracts"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// ValidName says whether name is a valid config name ([A-Za-z0-9._-]+):
// the rule for every named thing, forbidden policies included.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// ForbiddenPolicy rejects every string at its path that the pattern (Go RE2
// syntax, unanchored) matches, with rule "forbidden:<name>". Non-string
// values are not text and pass. The message names the pattern, never the
// matched text: what matched is exactly what must not leak into a review.
type ForbiddenPolicy struct {
	name string
	rule string
	path Path
	re   *regexp.Regexp
}

// NewForbidden is the forbidden policy name (part of the rule id) for re
// at path. The caller compiles re: config does, to report a bad pattern at
// its own key.
func NewForbidden(name, path string, re *regexp.Regexp) (contracts.Policy, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("name %q: must match [A-Za-z0-9._-]+", name)
	}
	p, err := ParsePath(path)
	if err != nil {
		return nil, err
	}
	if re.String() == "" {
		// It would match every string.
		return nil, fmt.Errorf("pattern for %s: must not be empty", name)
	}
	return &ForbiddenPolicy{name: name, rule: RuleForbiddenPrefix + name, path: p, re: re}, nil
}

// Check implements contracts.Policy.
func (f *ForbiddenPolicy) Check(out any, _ *contracts.Subject) ([]contracts.Violation, []contracts.Evidence) {
	var vs []contracts.Violation
	f.path.Walk(out, func(ptr []byte, v any) {
		if s, ok := v.(string); ok && f.re.MatchString(s) {
			vs = append(vs, contracts.Violation{
				Kind:    contracts.KindPolicy,
				Path:    string(ptr),
				Rule:    f.rule,
				Message: "matches forbidden pattern " + f.name,
			})
		}
	})
	return contracts.SortViolations(vs), nil
}

// OutputPath implements contracts.PathPolicy: Check reads the output only
// along its path.
func (f *ForbiddenPolicy) OutputPath() ([]string, []bool) { return f.path.tokensWild() }
