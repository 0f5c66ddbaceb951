package contracts

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/kaptinlin/jsonrepair"
)

// Mode is a contract's extraction mode.
type Mode string

const (
	ModeStrict  Mode = "strict"
	ModeLenient Mode = "lenient"
	ModeRepair  Mode = "repair"
)

// Limits bound the work extraction may do on one output.
type Limits struct {
	MaxBytes int // content longer than this is too_large before any parsing; 0: no limit
	MaxDepth int // nesting deeper than this is too_deep; 0: DefaultMaxDepth
}

// DefaultMaxDepth bounds object/array nesting of accepted outputs.
const DefaultMaxDepth = 64

// Extracted is an accepted JSON object.
type Extracted struct {
	// JSON is the object's exact bytes (for repair: the repaired JSON). It
	// may share the content string's memory: read only.
	JSON  []byte
	Value map[string]any // decoded; numbers are json.Number
}

// Parse-rule precedence when lenient extraction finds no object: the rule
// that says most about why is reported.
var failRank = map[string]int{RuleNotJSON: 0, RuleTopLevelNotObj: 1, RuleInvalidUTF8: 2, RuleTooDeep: 3, RuleDuplicateKey: 4}

// maxRepairBytes bounds what is handed to the repair library: its cost grows
// quadratically with the number of members (about 1 s at 64 KiB), so larger
// candidates keep their parse violation instead.
const maxRepairBytes = 32 << 10

// Extract finds the JSON object in a model's output according to mode (any
// mode other than lenient and repair is strict, the default).
// Exactly one result is meaningful: the accepted object, or a non-empty list
// of parse violations (path ""). hasTextProperty disables the lenient
// {"text": …} unwrapping for schemas that declare a top-level "text".
func Extract(content string, mode Mode, lim Limits, hasTextProperty bool) (Extracted, []Violation) {
	return extract(content, mode, lim, hasTextProperty, nil)
}

// extract is Extract decoding into sc's storage (nil: fresh).
func extract(content string, mode Mode, lim Limits, hasTextProperty bool, sc *decodeScratch) (Extracted, []Violation) {
	if lim.MaxBytes > 0 && len(content) > lim.MaxBytes {
		return rejectParse(parseViolation(RuleTooLarge, fmt.Sprintf("output is %d bytes, over the limit of %d", len(content), lim.MaxBytes)))
	}
	if strings.TrimSpace(content) == "" {
		return rejectParse(parseViolation(RuleEmptyOutput, "output is empty"))
	}
	if !utf8.ValidString(content) {
		return rejectParse(parseViolation(RuleInvalidUTF8, fmt.Sprintf("output is not valid UTF-8 (at byte %d)", invalidUTF8At(content))))
	}
	x := extractor{maxDepth: lim.MaxDepth, repair: mode == ModeRepair, sc: sc}
	if x.maxDepth <= 0 {
		x.maxDepth = DefaultMaxDepth
	}
	switch mode {
	case ModeLenient, ModeRepair:
		return x.lenient(content, !hasTextProperty)
	}
	return x.strict(content)
}

func rejectParse(v *Violation) (Extracted, []Violation) { return Extracted{}, []Violation{*v} }

func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return len(s)
}

type extractor struct {
	maxDepth int
	repair   bool
	fail     *Violation // the most informative failure so far (lenient)
	sc       *decodeScratch
}

// readOnlyBytes is s's memory as a byte slice, without the copy a
// conversion makes: the decoder only reads its input, and Extracted.JSON is
// read only.
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// strict accepts one object with only JSON whitespace around it; failures are
// classified so the rule tells the prompt author what the model did.
func (x *extractor) strict(content string) (Extracted, []Violation) {
	t, base := trimWS(content)
	b := readOnlyBytes(t)
	v, n, viol := decodeValueInto(b, base, x.maxDepth, x.sc)
	switch {
	case viol == nil && n == len(b):
		if m, ok := v.(map[string]any); ok {
			return Extracted{JSON: b, Value: m}, nil
		}
		return rejectParse(parseViolation(RuleTopLevelNotObj, "the output is a JSON "+jsonKindName(v)+", not an object"))
	case viol != nil && viol.Rule != RuleNotJSON:
		return rejectParse(viol) // duplicate_key, too_deep, invalid_utf8 (lone surrogate escapes)
	case viol == nil && t[0] == '{':
		return rejectParse(parseViolation(RuleProseAroundJSON, fmt.Sprintf("text follows the JSON object (at byte %d)", base+n)))
	}
	if c, _, ok := firstFence(t); ok && startsJSON(c) {
		return rejectParse(parseViolation(RuleMarkdownFence, "the JSON is wrapped in a markdown code fence"))
	}
	if viol != nil && startsJSON(t) {
		return rejectParse(viol) // broken JSON, not JSON inside prose
	}
	found := false
	scanObjects(t, func(s, e int) bool {
		_, cv := x.decode(b[s:e], base+s)
		found = cv == nil || cv.Rule != RuleNotJSON && cv.Rule != RuleTopLevelNotObj
		return !found
	})
	if found {
		return rejectParse(parseViolation(RuleProseAroundJSON, "the JSON object is surrounded by other text"))
	}
	return rejectParse(parseViolation(RuleNotJSON, "the output is not a JSON object"))
}

// startsJSON reports whether s, trimmed, opens an object or array.
func startsJSON(s string) bool {
	t, _ := trimWS(s)
	return t != "" && (t[0] == '{' || t[0] == '[')
}

// lenient tries, in order: the whole text as one JSON value (an object, or a
// {"text": …} wrapper whose string goes through the remaining steps), the
// first fenced block, each balanced {…} in the text; repair mode then
// retries, in the same order, the candidates that failed to parse, through
// the repair library. The whole text goes first because a text that is JSON
// is not prose: searching inside it would find fences and braces in its
// strings, or pick one object out of an array.
func (x *extractor) lenient(text string, wrapperOK bool) (Extracted, []Violation) {
	if strings.TrimSpace(text) == "" { // only reachable through the wrapper
		return rejectParse(parseViolation(RuleEmptyOutput, `the {"text": …} wrapper's string is empty`))
	}
	t, base := trimWS(text)
	whole := readOnlyBytes(t)
	v, n, viol := decodeValueInto(whole, base, x.maxDepth, x.sc)
	switch {
	case viol == nil && n == len(whole):
		m, ok := v.(map[string]any)
		if !ok {
			// The model answered JSON of the wrong shape: picking an object
			// out of an array would hide that.
			return rejectParse(parseViolation(RuleTopLevelNotObj, "the output is a JSON "+jsonKindName(v)+", not an object"))
		}
		if s, isStr := m["text"].(string); isStr && wrapperOK && len(m) == 1 {
			return x.lenient(s, false)
		}
		return Extracted{JSON: whole, Value: m}, nil
	case viol != nil && startsJSON(t):
		if viol.Rule != RuleNotJSON {
			// The text is one object or array that is wrong in itself: not
			// a container of other candidates.
			return rejectParse(viol)
		}
		x.note(viol)
	}

	var retry []string // candidates that failed on syntax, for repair
	try := func(c string, off int) (Extracted, bool) {
		c, lead := trimWS(c)
		if c == "" {
			return Extracted{}, false
		}
		b := readOnlyBytes(c)
		m, viol := x.decode(b, off+lead)
		if viol == nil {
			return Extracted{JSON: b, Value: m}, true
		}
		if viol.Rule == RuleNotJSON && startsJSON(c) {
			retry = append(retry, c)
		}
		return Extracted{}, false
	}
	if c, off, ok := firstFence(text); ok {
		if ex, ok := try(c, off); ok {
			return ex, nil
		}
	}
	var ex Extracted
	unclosed := scanObjects(text, func(s, e int) bool {
		var ok bool
		ex, ok = try(text[s:e], s)
		return !ok
	})
	if ex.Value != nil {
		return ex, nil
	}

	if x.repair {
		// After every clean candidate, so repair never overrides one.
		if unclosed >= 0 {
			retry = append(retry, text[unclosed:]) // a truncated object
		}
		if startsJSON(t) {
			retry = append(retry, t)
		}
		seen := make(map[string]bool, len(retry))
		for _, c := range retry {
			if seen[c] {
				continue
			}
			seen[c] = true
			if ex, ok := x.repairOne(c); ok {
				return ex, nil
			}
		}
	}
	if x.fail == nil {
		return rejectParse(parseViolation(RuleNotJSON, "no JSON object found in the output"))
	}
	return rejectParse(x.fail)
}

// decode decodes one candidate object, noting why it failed.
func (x *extractor) decode(b []byte, base int) (map[string]any, *Violation) {
	v, n, viol := decodeValueInto(b, base, x.maxDepth, x.sc)
	if viol == nil {
		m, ok := v.(map[string]any)
		switch {
		case !isWS(b[n:]):
			viol = parseViolation(RuleNotJSON, fmt.Sprintf("unexpected text after the JSON value at byte %d", base+n))
		case !ok:
			viol = parseViolation(RuleTopLevelNotObj, "the output is a JSON "+jsonKindName(v)+", not an object")
		default:
			return m, nil
		}
	}
	x.note(viol)
	return nil, viol
}

// note keeps the most informative failure, the first among equals.
func (x *extractor) note(v *Violation) {
	if x.fail == nil || failRank[v.Rule] > failRank[x.fail.Rule] {
		x.fail = v
	}
}

// repairOne runs the repair library on one candidate and accepts the result
// exactly as the library wrote it, if it is an object without duplicate keys.
func (x *extractor) repairOne(c string) (Extracted, bool) {
	if len(c) > maxRepairBytes {
		return Extracted{}, false
	}
	if jsonDepth(c) > x.maxDepth {
		// The library recurses per level; deep input cannot come out shallow.
		x.note(parseViolation(RuleTooDeep, fmt.Sprintf("nesting deeper than %d levels", x.maxDepth)))
		return Extracted{}, false
	}
	r, ok := safeRepair(c)
	if !ok {
		return Extracted{}, false
	}
	b := []byte(r)
	m, viol := x.decode(b, 0)
	if viol != nil {
		return Extracted{}, false
	}
	return Extracted{JSON: b, Value: m}, true
}

// safeRepair shields extraction's no-panic guarantee from the library.
func safeRepair(s string) (out string, ok bool) {
	defer func() {
		if recover() != nil {
			out, ok = "", false
		}
	}()
	r, err := jsonrepair.Repair(s)
	return r, err == nil
}
