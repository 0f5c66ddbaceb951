package policy

import (
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// CanMatchSchema reports whether the path could address a value in some
// instance valid under schema (decoded JSON; boolean schemas allowed). Config
// validation rejects policy paths for which it is false, so it errs towards
// true: only keywords that clearly rule a step out make it false (a "type"
// without object/array, additionalProperties or items false, a missing
// prefixItems slot with items false, unevaluatedProperties/Items false with
// nothing else evaluating the step, the false schema). Keywords it does not
// model (not, const, enum, min/max counts, propertyNames, remote or
// anchor $refs, unsupported regexes) never make it false.
//
// allOf and $ref (siblings of $ref are applied alongside it, as in 2020-12)
// must all allow the step; anyOf, oneOf and then/else need one branch to.
// Local "#..." $refs are resolved within schema; cycles and repeated work are
// cut by remembering each (subschema, depth) pair.
func (p Path) CanMatchSchema(schema any) bool { return p.canMatch(schema, false) }

// CanMatchStringInSchema is CanMatchSchema for a value that must be a
// string: it is false also when every subschema the path reaches declares a
// "type" without "string". Labels, evidence, questions and forbidden
// patterns judge strings, so such a path (an array's own path where its
// items were meant, "/tags" for "/tags/*", or an integer member) either
// fails every output that has it or never judges anything. Like
// CanMatchSchema it errs towards true: only "type" rules a string out
// (const, enum and the rest never do).
func (p Path) CanMatchStringInSchema(schema any) bool { return p.canMatch(schema, true) }

// canMatch is the walk behind both: leafString also asks the last step to
// allow a string.
func (p Path) canMatch(schema any, leafString bool) bool {
	m := &schemaMatcher{
		p:          p,
		root:       schema,
		memo:       map[memoKey]reach{},
		re:         map[string]*regexp.Regexp{},
		leafString: leafString,
	}
	return m.match(schema, 0) != reachNo
}

// DeclaresProperty reports whether schema declares the member name at its
// top level: in its own "properties", or in those of a subschema applied to
// the same instance (a local $ref, allOf, anyOf, oneOf, then, else). A root
// that is only a $ref to a definition, as schema generators write it
// ({"$ref": "#/definitions/Answer", ...}), declares what the definition
// does.
func DeclaresProperty(schema any, name string) bool {
	m := &schemaMatcher{root: schema}
	seen := map[uintptr]bool{}
	var walk func(node any) bool
	walk = func(node any) bool {
		n, ok := node.(map[string]any)
		if !ok {
			return false
		}
		if k := reflect.ValueOf(n).Pointer(); seen[k] {
			return false
		} else {
			seen[k] = true
		}
		if props, ok := n["properties"].(map[string]any); ok {
			if _, ok := props[name]; ok {
				return true
			}
		}
		if ref, ok := n["$ref"].(string); ok {
			if t, ok := m.resolve(ref); ok && walk(t) {
				return true
			}
		}
		for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
			bs, _ := n[kw].([]any)
			for _, b := range bs {
				if walk(b) {
					return true
				}
			}
		}
		return walk(n["then"]) || walk(n["else"])
	}
	return walk(schema)
}

// reach is how a subschema relates to the rest of the path from some depth.
// The order matters: disjunctions take the maximum, conjunctions fail on
// reachNo and otherwise take the maximum too.
type reach uint8

const (
	// reachNo: no valid instance has a value there.
	reachNo reach = iota
	// reachFree: the subschema says nothing about the next step, so it is
	// allowed but unevaluated (unevaluatedProperties/Items may still forbid it).
	reachFree
	// reachYes: a keyword evaluated the next step and allows the rest.
	reachYes
)

type memoKey struct {
	node  uintptr // the map's identity; the schema keeps it alive
	depth int
}

type schemaMatcher struct {
	p    Path
	root any
	memo map[memoKey]reach
	re   map[string]*regexp.Regexp
	// leafString: the value at the end of the path must be able to be a
	// string (CanMatchStringInSchema).
	leafString bool
}

func (m *schemaMatcher) match(node any, d int) reach {
	n, ok := node.(map[string]any)
	if !ok {
		if b, isBool := node.(bool); isBool && !b {
			return reachNo
		}
		// true, or something that is not a schema at all (the schema
		// compiler reports that): no constraint.
		if d == len(m.p.tokens) {
			return reachYes
		}
		return reachFree
	}
	if d == len(m.p.tokens) && !m.leafString {
		return reachYes
	}
	key := memoKey{reflect.ValueOf(n).Pointer(), d}
	if r, seen := m.memo[key]; seen {
		return r
	}
	// A cycle back to this pair adds nothing new; answering "free" while it
	// is in progress keeps the result permissive rather than wrong.
	m.memo[key] = reachFree
	r := m.object(n, d)
	m.memo[key] = r
	return r
}

func (m *schemaMatcher) object(n map[string]any, d int) reach {
	r := m.local(n, d)
	if r == reachNo {
		return reachNo
	}
	and := func(x reach) bool {
		if x == reachNo {
			r = reachNo
			return false
		}
		r = max(r, x)
		return true
	}
	if ref, ok := n["$ref"].(string); ok {
		if !and(m.ref(ref, d)) {
			return reachNo
		}
	}
	if all, ok := n["allOf"].([]any); ok {
		for _, b := range all {
			if !and(m.match(b, d)) {
				return reachNo
			}
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if bs, ok := n[kw].([]any); ok && len(bs) > 0 {
			g := reachNo
			for _, b := range bs {
				g = max(g, m.match(b, d))
			}
			if !and(g) {
				return reachNo
			}
		}
	}
	if _, ok := n["if"]; ok {
		g := reachNo
		for _, kw := range []string{"then", "else"} {
			if b, has := n[kw]; has {
				g = max(g, m.match(b, d))
			} else {
				g = max(g, reachFree)
			}
		}
		if !and(g) {
			return reachNo
		}
	}
	if deps, ok := n["dependentSchemas"].(map[string]any); ok {
		// Each applies only when its trigger key is present, so it can
		// evaluate the step but never forbid it.
		for _, k := range slices.Sorted(maps.Keys(deps)) {
			and(max(reachFree, m.match(deps[k], d)))
		}
	}
	if r == reachFree {
		r = m.unevaluated(n, d)
	}
	return r
}

// local judges the step by the node's own keywords. Past the last step
// (only with leafString) it judges whether the value can be a string; the
// conjunctions and disjunctions in object combine that as for any step.
func (m *schemaMatcher) local(n map[string]any, d int) reach {
	if d == len(m.p.tokens) {
		if allowsString(n["type"]) {
			return reachYes
		}
		return reachNo
	}
	objOK, arrOK := allowsContainers(n["type"])
	_, isIdx := contracts.PointerIndex(m.p.tokens[d])
	r := reachNo
	if objOK {
		r = max(r, m.objectStep(n, d))
	}
	if arrOK && (m.p.wild[d] || isIdx) {
		r = max(r, m.arrayStep(n, d))
	}
	return r
}

func (m *schemaMatcher) objectStep(n map[string]any, d int) reach {
	props, _ := n["properties"].(map[string]any)
	pats, _ := n["patternProperties"].(map[string]any)
	ap, hasAP := n["additionalProperties"]
	r := reachNo
	if m.p.wild[d] {
		for _, k := range slices.Sorted(maps.Keys(props)) {
			r = max(r, m.child(props[k], d))
		}
		for _, k := range slices.Sorted(maps.Keys(pats)) {
			r = max(r, m.child(pats[k], d))
		}
		if !hasAP {
			return max(r, reachFree)
		}
		return max(r, m.child(ap, d))
	}
	tok := m.p.tokens[d]
	matched := false
	if c, ok := props[tok]; ok {
		matched = true
		r = max(r, m.child(c, d))
	}
	for _, pat := range slices.Sorted(maps.Keys(pats)) {
		if m.patternMatches(pat, tok) {
			matched = true
			r = max(r, m.child(pats[pat], d))
		}
	}
	if matched {
		return r
	}
	if !hasAP {
		return reachFree
	}
	return m.child(ap, d)
}

func (m *schemaMatcher) arrayStep(n map[string]any, d int) reach {
	prefix, _ := n["prefixItems"].([]any)
	rest, hasRest := n["items"]
	if _, ok := n["prefixItems"]; !ok {
		if tuple, isTuple := rest.([]any); isTuple { // draft 2019-09 and older
			prefix = tuple
			rest, hasRest = n["additionalItems"]
		}
	}
	r := reachNo
	if m.p.wild[d] {
		for _, c := range prefix {
			r = max(r, m.child(c, d))
		}
	} else {
		i, _ := contracts.PointerIndex(m.p.tokens[d])
		if i < len(prefix) {
			return m.child(prefix[i], d)
		}
	}
	if !hasRest {
		return max(r, reachFree)
	}
	return max(r, m.child(rest, d))
}

// unevaluated applies unevaluatedProperties/Items to a step nothing else
// evaluated.
func (m *schemaMatcher) unevaluated(n map[string]any, d int) reach {
	up, hasUP := n["unevaluatedProperties"]
	ui, hasUI := n["unevaluatedItems"]
	if !hasUP && !hasUI {
		return reachFree
	}
	objOK, arrOK := allowsContainers(n["type"])
	_, isIdx := contracts.PointerIndex(m.p.tokens[d])
	r := reachNo
	if objOK {
		if hasUP {
			r = max(r, m.child(up, d))
		} else {
			r = max(r, reachFree)
		}
	}
	if arrOK && (m.p.wild[d] || isIdx) {
		if hasUI {
			r = max(r, m.child(ui, d))
		} else {
			r = max(r, reachFree)
		}
	}
	return r
}

// child judges the value a keyword assigns to the step at depth d: the step
// is then evaluated, so anything but reachNo becomes reachYes.
func (m *schemaMatcher) child(s any, d int) reach {
	if m.match(s, d+1) == reachNo {
		return reachNo
	}
	return reachYes
}

func (m *schemaMatcher) ref(ref string, d int) reach {
	target, ok := m.resolve(ref)
	if !ok {
		// Remote, anchor or $id-relative: not ours to judge (config
		// validation rejects unresolved refs separately).
		return reachFree
	}
	return m.match(target, d)
}

func (m *schemaMatcher) resolve(ref string) (any, bool) {
	if ref == "#" {
		return m.root, true
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, false
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, false
	}
	return resolvePointer(m.root, frag)
}

// resolvePointer resolves an RFC 6901 pointer ("" is v itself) in a
// decoded JSON value: a $ref's fragment here, and the oracle FuzzParsePathWalk
// checks Path.Walk's pointers against (Walk shares none of this code).
func resolvePointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = contracts.UnescapePointerToken(tok)
		switch x := v.(type) {
		case map[string]any:
			c, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			i, ok := contracts.PointerIndex(tok)
			if !ok || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func (m *schemaMatcher) patternMatches(pat, s string) bool {
	re, seen := m.re[pat]
	if !seen {
		re, _ = regexp.Compile(pat)
		m.re[pat] = re
	}
	// ECMA-262 patterns RE2 cannot compile might match: assume they do.
	return re == nil || re.MatchString(s)
}

// allowsContainers reads "type": absent or malformed allows both.
// allowsString reports whether a "type" value admits strings (no "type"
// admits everything).
func allowsString(t any) bool {
	switch x := t.(type) {
	case string:
		return x == "string"
	case []any:
		return slices.Contains(x, any("string"))
	}
	return true
}

func allowsContainers(t any) (obj, arr bool) {
	switch x := t.(type) {
	case string:
		return x == "object", x == "array"
	case []any:
		for _, e := range x {
			switch e {
			case "object":
				obj = true
			case "array":
				arr = true
			}
		}
		return obj, arr
	}
	return true, true
}
