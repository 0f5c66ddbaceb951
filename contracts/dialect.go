package contracts

// Dialects: every (sub)schema is judged by the draft its $schema names
// (inherited from the enclosing schema; draft 2020-12 when none does).
//
// The validator (kaptinlin/jsonschema v0.9.8) already reads each
// subschema's $schema and applies the older spellings of its draft:
// "dependencies", array "items" with "additionalItems", draft-04's boolean
// exclusiveMaximum/Minimum and "id", "definitions", and the rule that
// drafts 4-7 ignore the siblings of "$ref". It does not:
//   - ignore keywords the declared draft does not have: "if" under
//     draft-04 or "const" under draft-04 were applied;
//   - give draft-04's "integer" its meaning, a number written without a
//     fraction or exponent (12345.0 was accepted);
//   - reject everything for an empty "enum" (it accepted everything).
//
// normalizeDialects rewrites the schema document once, at compile time,
// so the validator and the fast path (which both compile the rewritten
// document) judge by the declared draft: keywords from other drafts are
// dropped, and the two checks the validator lacks become sentinel formats
// (formatOverrides) in an appended "allOf" entry, which the violation
// collector reports under the keyword the user wrote ("type", "enum").
// "dependencies" under 2020-12 is judged the same way, in an appended
// 2019-09 entry; patterns get ECMA-262's \s and \S.
// Nothing moves, so JSON pointers into the document keep resolving.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonschema"
)

// Sentinel formats added by normalizeDialects. The prefix cannot clash
// with a registered format; a user who writes one gets its check.
const (
	sentinelPrefix    = "contractd-dialect:"
	fmtDraft4Integer  = sentinelPrefix + "type"
	fmtEmptyEnum      = sentinelPrefix + "enum"
	msgDraft4Integer  = "value is not an integer (draft-04: written without a fraction or exponent)"
	msgEmptyEnum      = "no value is allowed (empty enum)"
	keywordIntroduced = "introduced"
)

// draft4Integer fails a number whose value is an integer but whose JSON
// text has a fraction or exponent: not an integer to draft-04. Other
// values pass (the "type" keyword beside the sentinel judges them, so a
// 1.5 fails once).
func draft4Integer(v any) bool {
	n, ok := v.(json.Number)
	if !ok || !strings.ContainsAny(string(n), ".eE") {
		return true
	}
	f := parseNum(string(n))
	return f.unknown || !f.isInt()
}

func (d fdialect) name() string {
	switch d {
	case dialect2019:
		return "draft 2019-09"
	case dialect7:
		return "draft-07"
	case dialect6:
		return "draft-06"
	case dialect4:
		return "draft-04"
	}
	return "draft 2020-12"
}

// order places drafts in time (the fdialect constants are not).
func (d fdialect) order() int {
	switch d {
	case dialect4:
		return 4
	case dialect6:
		return 6
	case dialect7:
		return 7
	case dialect2019:
		return 2019
	}
	return 2020
}

// keywordSpan is the range of drafts that define a keyword the validator
// reads (first and last draft, inclusive).
type keywordSpan struct{ first, last fdialect }

var (
	allDrafts = keywordSpan{dialect4, dialect2020}
	from6     = keywordSpan{dialect6, dialect2020}
	from7     = keywordSpan{dialect7, dialect2020}
	from2019  = keywordSpan{dialect2019, dialect2020}
	only2020  = keywordSpan{dialect2020, dialect2020}
	only2019  = keywordSpan{dialect2019, dialect2019}
	only4     = keywordSpan{dialect4, dialect4}
	upTo2019  = keywordSpan{dialect4, dialect2019}
	upTo7     = keywordSpan{dialect4, dialect7}
)

// keywordDrafts lists the keywords of drafts 4 to 2020-12 that the
// validator reads. Keywords outside it (extensions, annotations such as
// "title") have no effect in any draft and are left alone.
var keywordDrafts = map[string]keywordSpan{
	"$schema": allDrafts, "$ref": allDrafts, "type": allDrafts, "enum": allDrafts,
	"multipleOf": allDrafts, "maximum": allDrafts, "exclusiveMaximum": allDrafts,
	"minimum": allDrafts, "exclusiveMinimum": allDrafts, "maxLength": allDrafts,
	"minLength": allDrafts, "pattern": allDrafts, "items": allDrafts, "maxItems": allDrafts,
	"minItems": allDrafts, "uniqueItems": allDrafts, "maxProperties": allDrafts,
	"minProperties": allDrafts, "required": allDrafts, "properties": allDrafts,
	"patternProperties": allDrafts, "additionalProperties": allDrafts, "allOf": allDrafts,
	"anyOf": allDrafts, "oneOf": allDrafts, "not": allDrafts, "format": allDrafts,
	"definitions": upTo7, "additionalItems": upTo2019, "dependencies": upTo2019,
	"id":  only4,
	"$id": from6, "const": from6, "contains": from6, "propertyNames": from6,
	"if": from7, "then": from7, "else": from7, "contentMediaType": from7, "contentEncoding": from7,
	"$anchor": from2019, "$defs": from2019, "$vocabulary": from2019,
	"dependentRequired": from2019, "dependentSchemas": from2019, "maxContains": from2019,
	"minContains": from2019, "unevaluatedItems": from2019, "unevaluatedProperties": from2019,
	"contentSchema": from2019,
	"$recursiveRef": only2019, "$recursiveAnchor": only2019,
	"prefixItems": only2020, "$dynamicRef": only2020, "$dynamicAnchor": only2020,
}

// honouredLate are earlier spellings a later draft no longer defines but
// contractd still reads there, failing closed; using them is warned about,
// not dropped (dropping "definitions" would break every "#/definitions/..."
// $ref in the wild, array "items" with "additionalItems" has a single
// reading, and 2020-12's meta-schema keeps "dependencies" for
// compatibility).
var honouredLate = map[string]string{
	"definitions":     "read as $defs",
	"additionalItems": "read with an array-form items",
	"dependencies":    "honoured as dependentRequired/dependentSchemas",
}

// siblingNeutral are keywords beside "$ref" whose being ignored in drafts
// 4-7 changes nothing worth a warning.
var siblingNeutral = map[string]bool{
	"$schema": true, "$id": true, "id": true, "definitions": true, "$defs": true,
	"title": true, "description": true, "$comment": true, "default": true, "examples": true,
}

// schemaKeywords say where subschemas sit: one schema, an array of them,
// or a map of them.
var (
	oneSchemaKeywords = map[string]bool{
		"additionalProperties": true, "not": true, "if": true, "then": true, "else": true,
		"contains": true, "propertyNames": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contentSchema": true, "additionalItems": true,
	}
	schemaArrayKeywords = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
	schemaMapKeywords   = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
		"dependentSchemas": true, "dependencies": true,
	}
)

// dialectResult is what normalizeDialects found and did.
type dialectResult struct {
	doc      any               // the document the validator compiles
	changed  bool              // doc differs from the input
	warnings []string          // "at #/ptr: message", sorted
	refused  error             // set when the validator would judge the schema wrongly
	patterns map[string]string // rewritten pattern -> the user's (ecmaWhitespace)
}

// normalizeDialects returns doc rewritten for the validator (see the
// package comment above); doc itself is not modified. d is the dialect of
// a root that declares none.
func normalizeDialects(doc any, d fdialect) dialectResult {
	n := &normalizer{patterns: map[string]string{}}
	out := n.schema(doc, "", d)
	// In document order of their pointers, then by message.
	slices.SortFunc(n.warnings, func(a, b string) int {
		if c := ComparePointers(warningPointer(a), warningPointer(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	res := dialectResult{doc: out, changed: n.changed, warnings: slices.Compact(n.warnings), patterns: n.patterns}
	var skipped []string
	for _, ref := range n.midResources {
		uri := ref[:strings.Index(ref, "#/")]
		for _, id := range n.anchoredIDs {
			if uri == id || path.Base(uri) == path.Base(id) {
				skipped = append(skipped, ref)
			}
		}
	}
	if len(n.badPatterns) > 0 {
		slices.Sort(n.badPatterns)
		res.refused = errors.New(strings.Join(slices.Compact(n.badPatterns), "; "))
		return res
	}
	if n.dynamicRef && len(skipped) > 0 {
		slices.Sort(skipped)
		res.refused = fmt.Errorf("a $dynamicRef with a $ref into the middle of a resource that declares a $dynamicAnchor (%s) is not supported: "+
			"the validator would leave that resource out of the dynamic scope", strings.Join(slices.Compact(skipped), ", "))
	}
	return res
}

// warningPointer is the JSON pointer of an "at #/ptr: message" warning.
func warningPointer(w string) string {
	p, _, _ := strings.Cut(strings.TrimPrefix(w, "at #"), ": ")
	return p
}

type normalizer struct {
	changed  bool
	warnings []string
	// For refusing what the validator's dynamic scope gets wrong: it
	// registers only the resources whose root it evaluated, so a $ref into
	// the middle of another resource leaves that resource's
	// $dynamicAnchors out of the scope (a false accept).
	dynamicRef   bool
	midResources []string          // $refs of the form uri#/pointer
	anchors      int               // $dynamicAnchors seen so far
	anchoredIDs  []string          // $ids of subschemas holding a $dynamicAnchor
	badPatterns  []string          // patterns Go's RE2 cannot compile, explained
	patterns     map[string]string // rewritten pattern -> the user's
}

func (n *normalizer) warn(ptr, format string, args ...any) {
	n.warnings = append(n.warnings, fmt.Sprintf("at #%s: ", ptr)+fmt.Sprintf(format, args...))
}

func (n *normalizer) schema(v any, ptr string, inherited fdialect) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v // booleans; malformed values are the validator's to refuse
	}
	d := inherited
	if s, ok := m["$schema"].(string); ok {
		d = dialectOf(s, inherited)
		if d == inherited && !knownDialectURI(s) {
			n.warn(ptr, "$schema %q is not a draft contractd knows (draft-04, -06, -07, 2019-09, 2020-12); judged as %s", s, d.name())
		}
	}
	out := make(map[string]any, len(m)+1)
	if _, ok := m["$dynamicRef"]; ok && d == dialect2020 {
		n.dynamicRef = true
	}
	if _, ok := m["$dynamicAnchor"]; ok && d == dialect2020 {
		n.anchors++
	}
	anchorsBefore := n.anchors
	if id, ok := m["$id"].(string); ok && d == dialect2020 {
		defer func() {
			if n.anchors > anchorsBefore || m["$dynamicAnchor"] != nil {
				n.anchoredIDs = append(n.anchoredIDs, id)
			}
		}()
	}
	if ref, ok := m["$ref"].(string); ok {
		if i := strings.Index(ref, "#/"); i > 0 {
			n.midResources = append(n.midResources, ref)
		}
	}
	_, hasRef := m["$ref"]
	_, hasDefs := m["$defs"]
	_, hasDefinitions := m["definitions"]
	for k, val := range m {
		span, known := keywordDrafts[k]
		if known && (d.order() < span.first.order() || d.order() > span.last.order()) {
			switch {
			case k == "$defs" && !hasDefinitions:
				// A $ref may point into it; it never evaluates by itself.
				n.warn(ptr, "$defs is not a %s keyword (%s in %s); only $refs into it use it", d.name(), keywordIntroduced, span.first.name())
				out[k] = n.container(val, ptr+"/"+EscapePointerToken(k), d, k)
			case honouredLate[k] != "" && d.order() > span.last.order() && !(k == "definitions" && hasDefs):
				n.warn(ptr, "%s is not a %s keyword (last defined in %s); %s", k, d.name(), span.last.name(), honouredLate[k])
				out[k] = n.container(val, ptr+"/"+EscapePointerToken(k), d, k)
			case d.order() < span.first.order():
				n.warn(ptr, "%s is ignored: it is not a %s keyword (%s in %s)", k, d.name(), keywordIntroduced, span.first.name())
				n.changed = true
			default:
				n.warn(ptr, "%s is ignored: it is not a %s keyword (last defined in %s)", k, d.name(), span.last.name())
				n.changed = true
			}
			continue
		}
		if _, tuple := val.([]any); tuple && k == "items" && d == dialect2020 {
			n.warn(ptr, "items as an array is not a %s form (it is draft 2019-09's and earlier); read as prefixItems", d.name())
		}
		if hasRef && d.refIgnoresSiblings() && k != "$ref" && !siblingNeutral[k] && known {
			n.warn(ptr, "%s is ignored: %s ignores the siblings of $ref", k, d.name())
		}
		out[k] = n.container(val, ptr+"/"+EscapePointerToken(k), d, k)
	}
	if p, ok := out["pattern"].(string); ok {
		n.checkPattern(p, ptr+"/pattern")
		if e, changed := ecmaWhitespace(p); changed {
			out["pattern"] = e
			n.patterns[e] = p
			n.changed = true
		}
	}
	if pp, ok := out["patternProperties"].(map[string]any); ok {
		renamed := make(map[string]any, len(pp))
		for p, sub := range pp {
			n.checkPattern(p, ptr+"/patternProperties")
			if e, changed := ecmaWhitespace(p); changed {
				if _, clash := pp[e]; !clash {
					renamed[e] = sub
					n.patterns[e] = p
					n.changed = true
					continue
				}
			}
			renamed[p] = sub
		}
		out["patternProperties"] = renamed
	}
	// The checks the validator lacks, where they apply ($ref siblings are
	// not evaluated in drafts 4-7).
	if !(hasRef && d.refIgnoresSiblings()) {
		var sentinels []any
		if d == dialect4 && integerOnly(out["type"]) {
			sentinels = append(sentinels, map[string]any{"format": fmtDraft4Integer})
		}
		if e, ok := out["enum"].([]any); ok && len(e) == 0 {
			sentinels = append(sentinels, map[string]any{"format": fmtEmptyEnum})
		}
		if deps, ok := out["dependencies"].(map[string]any); ok && d == dialect2020 {
			// The validator reads "dependencies" under 2019-09 only: judge
			// it there, its dependent schemas still under 2020-12.
			inner := make(map[string]any, len(deps))
			for name, dep := range deps {
				if m, isObj := dep.(map[string]any); isObj && m["$schema"] == nil {
					m = maps.Clone(m)
					m["$schema"] = string(jsonschema.Draft202012)
					dep = m
				}
				inner[name] = dep
			}
			sentinels = append(sentinels, map[string]any{"$schema": string(jsonschema.Draft201909), "dependencies": inner})
		}
		if len(sentinels) > 0 {
			if all, ok := out["allOf"].([]any); ok || out["allOf"] == nil {
				out["allOf"] = append(slices.Clip(all), sentinels...)
				n.changed = true
			}
		}
	}
	return out
}

// ecmaOnly are ECMA-262 regex constructs Go's RE2 does not have: the ones
// that need backtracking, and the \c control escape.
var ecmaOnly = []struct {
	re   *regexp.Regexp
	name string
}{
	{regexp.MustCompile(`\(\?=`), "a lookahead (?=...)"},
	{regexp.MustCompile(`\(\?!`), "a negative lookahead (?!...)"},
	{regexp.MustCompile(`\(\?<=`), "a lookbehind (?<=...)"},
	{regexp.MustCompile(`\(\?<!`), "a negative lookbehind (?<!...)"},
	{regexp.MustCompile(`\\[1-9]|\\k<`), "a backreference (\\1, \\k<name>)"},
	{regexp.MustCompile(`\\c[A-Za-z]`), "a control escape (\\cX)"},
}

// ecmaSpace is ECMA-262's \s (WhiteSpace and LineTerminator) as the body
// of an RE2 character class; RE2's \s is only [\t\n\f\r ].
const ecmaSpace = `\t-\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// ecmaWhitespace rewrites \s and \S in an ECMA-262 pattern to RE2 classes
// with ECMA-262's meaning. A \S inside a class stays (RE2 has no class
// difference), as does everything else.
func ecmaWhitespace(p string) (string, bool) {
	if !strings.Contains(p, `\s`) && !strings.Contains(p, `\S`) {
		return p, false
	}
	if _, err := compilePattern(p); err != nil {
		return p, false // refused as it is
	}
	var b strings.Builder
	inClass, changed := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			switch next := p[i+1]; {
			case next == 's' && inClass:
				b.WriteString(ecmaSpace)
				changed = true
			case next == 's':
				b.WriteString("[" + ecmaSpace + "]")
				changed = true
			case next == 'S' && !inClass:
				b.WriteString("[^" + ecmaSpace + "]")
				changed = true
			default:
				b.WriteByte(c)
				b.WriteByte(next)
			}
			i++
			continue
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			// A ']' first in a class (after an optional '^') is literal.
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				b.WriteByte(']')
				i++
			}
			continue
		case c == ']' && inClass:
			inClass = false
		}
		b.WriteByte(c)
	}
	if _, err := compilePattern(b.String()); err != nil {
		return p, false // e.g. [\s-z]: a class range the rewrite would break
	}
	return b.String(), changed
}

// checkPattern records a pattern Go's RE2 engine cannot compile, naming
// the ECMA-262 construct when it is one RE2 lacks by design.
func (n *normalizer) checkPattern(p, ptr string) {
	_, err := compilePattern(p)
	if err == nil {
		return
	}
	for _, c := range ecmaOnly {
		if c.re.MatchString(p) {
			n.badPatterns = append(n.badPatterns, fmt.Sprintf("pattern %q at #%s uses %s, an ECMA-262 construct Go's RE2 engine does not run "+
				"(contractd matches in linear time and runs no backtracking patterns); rewrite the pattern without it", p, ptr, c.name))
			return
		}
	}
	n.badPatterns = append(n.badPatterns, fmt.Sprintf("pattern %q at #%s does not compile: %v", p, ptr, err))
}

// container rewrites the subschemas a keyword holds.
func (n *normalizer) container(val any, ptr string, d fdialect, k string) any {
	switch {
	case oneSchemaKeywords[k]:
		return n.schema(val, ptr, d)
	case k == "items":
		if arr, ok := val.([]any); ok {
			return n.array(arr, ptr, d)
		}
		return n.schema(val, ptr, d)
	case schemaArrayKeywords[k]:
		if arr, ok := val.([]any); ok {
			return n.array(arr, ptr, d)
		}
	case schemaMapKeywords[k]:
		if mm, ok := val.(map[string]any); ok {
			out := make(map[string]any, len(mm))
			for name, sub := range mm {
				if k == "dependencies" {
					if _, isList := sub.([]any); isList {
						out[name] = sub
						continue
					}
				}
				out[name] = n.schema(sub, ptr+"/"+EscapePointerToken(name), d)
			}
			return out
		}
	}
	return val
}

func (n *normalizer) array(arr []any, ptr string, d fdialect) []any {
	out := make([]any, len(arr))
	for i, sub := range arr {
		out[i] = n.schema(sub, fmt.Sprintf("%s/%d", ptr, i), d)
	}
	return out
}

// integerOnly reports whether a "type" value admits integers but not
// other numbers.
func integerOnly(t any) bool {
	switch x := t.(type) {
	case string:
		return x == "integer"
	case []any:
		return slices.Contains(x, any("integer")) && !slices.Contains(x, any("number"))
	}
	return false
}

func knownDialectURI(s string) bool {
	const probe = fdialect(255)
	return dialectOf(s, probe) != probe
}

// encodeSchemaDoc writes a rewritten document for the validator: numbers
// as written (json.Number), no HTML escaping.
func encodeSchemaDoc(doc any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// patterns caches compiled schema patterns, so the dialect checks and the
// fast path compile each pattern once (configs and reloads bring a few
// hundred at most; past patternCacheMax new ones are compiled uncached).
var patterns struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}

const patternCacheMax = 4096

// compilePattern is regexp.Compile through the cache.
func compilePattern(p string) (*regexp.Regexp, error) {
	patterns.Lock()
	re, ok := patterns.m[p]
	patterns.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	patterns.Lock()
	if patterns.m == nil {
		patterns.m = map[string]*regexp.Regexp{}
	}
	if len(patterns.m) < patternCacheMax {
		patterns.m[p] = re
	}
	patterns.Unlock()
	return re, nil
}
