package contracts

import (
	"slices"
	"strings"
	"sync"
)

// Contract is a compiled output contract: extraction mode, schema, policies.
type Contract struct {
	Name            string
	SHA256          string // identifies the contract's definition (schema and settings)
	Schema          *Schema
	Mode            Mode
	Limits          Limits
	Policies        []Policy
	HasTextProperty bool // the schema declares a top-level "text" property (lenient wrapper rule)

	scratch sync.Pool // *decodeScratch: the storage of outputs judged valid

	planOnce sync.Once
	plan     *streamPlan // the one-pass check (stream.go); nil: none
}

// Result is the verdict on one output.
type Result struct {
	Valid bool
	// JSON is the accepted object's bytes (set when extraction succeeded),
	// read only: it may share the content string's memory.
	JSON       []byte
	Violations []Violation // sorted; always non-nil (empty when Valid)
	Evidence   []Evidence  // for accepted snippets; always non-nil
}

// Check judges one output: extraction, then schema, then policies. All
// violations found are reported (policies run even when the schema fails,
// so one review shows every reason), sorted and deduplicated.
//
// The decoded output never leaves Check (policies must not retain it), so
// when the fast schema path accepts it, its maps, arrays and strings are
// kept for the contract's next check. Any other verdict leaves them to the
// collector: the library and violation messages are not held to that.
//
// A strict contract first tries the one-pass check (stream.go), which
// decodes only what its policies read; when it cannot judge the output,
// the full path below decides.
func (c *Contract) Check(content string, s *Subject) Result {
	return c.check(content, s, true)
}

// check is Check; stream false skips the one-pass check (tests compare).
func (c *Contract) check(content string, s *Subject, stream bool) Result {
	res := Result{Evidence: []Evidence{}}
	sc, _ := c.scratch.Get().(*decodeScratch)
	if sc == nil {
		sc = new(decodeScratch)
	}
	if p := c.streamPlan(); p != nil && stream {
		// A failed pass leaves sc's cursors where it stopped; the full
		// path's decode continues after them.
		if b, out, ok := c.checkStream(p, content, sc); ok {
			res.JSON = b
			return c.verdict(res, nil, out, s, false, sc)
		}
	}
	ex, vs := extract(content, c.Mode, c.Limits, c.HasTextProperty, sc)
	if len(vs) > 0 {
		res.Violations = SortViolations(vs)
		return res
	}
	res.JSON = ex.JSON
	vs, library := c.Schema.validate(ex.Value)
	return c.verdict(res, vs, ex.Value, s, library, sc)
}

// verdict finishes a check whose output passed extraction: it runs the
// policies on out and adds their violations to the schema's (vs), sorts
// the evidence and the violations, and sets Valid; sc goes back to the
// pool when out was valid by the fast tree (library false).
func (c *Contract) verdict(res Result, vs []Violation, out map[string]any, s *Subject, library bool, sc *decodeScratch) Result {
	if s == nil {
		s = &Subject{}
	}
	for _, p := range c.Policies {
		pv, pe := p.Check(out, s)
		vs = append(vs, pv...)
		res.Evidence = append(res.Evidence, pe...)
	}
	slices.SortStableFunc(res.Evidence, func(a, b Evidence) int {
		if c := ComparePointers(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.SHA256, b.SHA256)
	})
	res.Violations = SortViolations(vs)
	if res.Violations == nil {
		res.Violations = []Violation{} // a list in check output, audit and review, never null
	}
	res.Valid = len(res.Violations) == 0
	if res.Valid && !library && sc.reset() {
		c.scratch.Put(sc)
	}
	return res
}
