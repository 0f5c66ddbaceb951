package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/contractd/contractd/contracts"
)

// EvidencePolicy requires every value at its path to be a non-empty string
// that occurs verbatim (exact, case-sensitive) in the source text (rule
// "evidence_not_found"). The source is a string in the client's input object
// named by a pointer, or, without one, the last user message as the client
// sent it.
//
// Definitions the spec leaves open:
//   - An empty snippet is a violation: it occurs in every text, so it would
//     let a model "cite" without showing anything.
//   - A non-string value is a violation.
//   - A missing or non-string source, or no last user message, makes every
//     snippet a violation: nothing can be verified, and unverified evidence
//     must not be accepted.
//   - A path that matches nothing is not a violation; require the field in
//     the schema (with minItems) when evidence is mandatory.
//
// Accepted snippets yield contracts.Evidence records, in the path's walk
// order, locating the first occurrence in Unicode code points.
type EvidencePolicy struct {
	path      Path
	source    Path
	fromInput bool
}

// NewEvidence builds an evidence policy. source "" means the last user
// message; otherwise it is a JSON Pointer (without "*") into the input.
func NewEvidence(path string, source string) (contracts.Policy, error) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, err
	}
	e := &EvidencePolicy{path: p}
	if source != "" {
		src, err := ParsePath(source)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		if src.HasWildcard() {
			return nil, fmt.Errorf("source %q: must name one input field, \"*\" is not allowed", source)
		}
		e.source, e.fromInput = src, true
	}
	return e, nil
}

// Check implements contracts.Policy.
func (e *EvidencePolicy) Check(out any, s *contracts.Subject) ([]contracts.Violation, []contracts.Evidence) {
	if s == nil {
		s = &contracts.Subject{}
	}
	text, where, problem := e.sourceText(s)
	var vs []contracts.Violation
	var evs []contracts.Evidence
	e.path.Walk(out, func(b []byte, v any) {
		ptr := string(b)
		fail := func(msg string) {
			vs = append(vs, contracts.Violation{Kind: contracts.KindPolicy, Path: ptr, Rule: RuleEvidenceNotFound, Message: msg})
		}
		snippet, ok := v.(string)
		switch {
		case !ok:
			fail("evidence must be a string, got " + contracts.TypeName(v))
			return
		case snippet == "":
			fail("evidence snippet is empty")
			return
		case problem != "":
			fail(problem)
			return
		}
		i := strings.Index(text, snippet)
		if i < 0 {
			fail(fmt.Sprintf("evidence snippet (%s) not found in %s (exact, case-sensitive match)",
				plural(utf8.RuneCountInString(snippet), "character", "characters"), where))
			return
		}
		start := utf8.RuneCountInString(text[:i])
		sum := sha256.Sum256([]byte(snippet))
		evs = append(evs, contracts.Evidence{
			Path:   ptr,
			Start:  start,
			End:    start + utf8.RuneCountInString(snippet),
			SHA256: hex.EncodeToString(sum[:]),
		})
	})
	return contracts.SortViolations(vs), evs
}

// sourceText finds the text snippets must come from; problem is a message
// for every snippet when there is none.
func (e *EvidencePolicy) sourceText(s *contracts.Subject) (text, where, problem string) {
	if !e.fromInput {
		where = "the last user message"
		if !s.HasLastUser {
			return "", where, "no user message to find evidence in"
		}
		return s.LastUser, where, ""
	}
	where = "input " + e.source.String()
	found := false
	var v any
	e.source.Walk(s.Input, func(_ []byte, x any) { v, found = x, true })
	if !found {
		return "", where, fmt.Sprintf("evidence source: the input has no %s", e.source.String())
	}
	str, ok := v.(string)
	if !ok {
		return "", where, fmt.Sprintf("evidence source: %s is %s, not a string", where, contracts.TypeName(v))
	}
	return str, where, ""
}

// OutputPath implements contracts.PathPolicy: Check reads the output only
// along its path (the source is read from the input).
func (e *EvidencePolicy) OutputPath() ([]string, []bool) { return e.path.tokensWild() }
