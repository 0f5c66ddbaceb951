package contracts

// Fast path for Schema.Validate.
//
// The JSON Schema library (kaptinlin/jsonschema) builds a full result tree
// for every instance: fmt.Sprintf'd locations per node, a big.Rat per
// number, about a thousand allocations for a 1.5 KB output. Most outputs are
// valid, and a valid verdict needs none of that. At compile time the schema
// document is compiled a second time, here, into a small tree of fnodes that
// answers only "valid or not" for a conservative subset of the vocabulary,
// mirroring the library's own semantics (quirks included) keyword by
// keyword. Schema.Validate asks the fast tree first; only when it says
// "not valid" does the library run, so violation shapes never change.
//
// Both compile the document as dialect.go rewrote it for its declared
// drafts, so the dialect checks the library lacks (draft-04 integers, empty
// enums, keywords of other drafts) are in the document both read.
//
// Soundness rule: valid(v) == true must imply that the library accepts v.
// Every unsupported construct makes the fast tree unavailable (nil), either
// for the whole schema or, for subschemas the instance can never reach, not
// at all. "false" is always a safe answer: the library then decides.
//
// Library semantics mirrored here (kaptinlin/jsonschema at
// mirroredJSONSchemaVersion, which TestFastPathMirrorsTheLibraryInGoMod
// holds go.mod to: an upgrade must come with a review of the points below,
// or an output the new library rejects could pass here; see its
// validate.go, utils.go, rat.go, ref.go, dialect.go, schema.go and the
// keyword files):
//   - numbers are exact rationals (big.Rat.SetString of the JSON text);
//     "integer" is any number whose rational value is an integer (1.0, 1e2);
//     a number big.Rat cannot parse (|exponent − fraction digits| > 1e6) has
//     type "unknown": it matches no "type" and skips numeric keywords.
//   - enum/const equality: numbers by value (1 == 1.0), objects by key set,
//     an unparseable number equals nothing, not even itself; an empty enum
//     accepts everything.
//   - minLength/maxLength count runes and compare with int(float64(kw));
//     min/maxItems and min/maxProperties compare as float64.
//   - pattern and patternProperties are Go regexps, unanchored.
//   - "$ref": "#/…" resolves as a JSON pointer against the schema holding the
//     $ref first, then its ancestors; "#" is the nearest ancestor with an id.
//     Drafts 4, 6 and 7 ignore the siblings of $ref when evaluating.
//   - "items": [..] is prefixItems (any draft), its "additionalItems" becomes
//     "items"; draft-04 boolean exclusiveMinimum/Maximum move minimum/maximum.
//   - format: Formats[name](v) for known names (the validator decides which
//     types it applies to); names the library does not know are annotations
//     (CompileSchema registers them as always-true custom formats).
//   - keywords the library does not know are dropped by it, so ignored here;
//     "definitions" is $defs unless $defs is present; "dependencies" is an
//     extension in 2020-12 (ignored) and dependentRequired/dependentSchemas
//     before (both only on objects, dependent schemas applied in place).

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"
	"math"
	"math/big"
	"math/bits"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/kaptinlin/jsonschema"
)

// mirroredJSONSchemaVersion is the kaptinlin/jsonschema release whose
// semantics the fast path mirrors.
const mirroredJSONSchemaVersion = "v0.9.8"

// fastValidator is the compiled fast path of one schema.
type fastValidator struct {
	root *fnode
}

// errFastUnsupported aborts a fast evaluation that met a Go type decoded
// JSON never has; the library then decides.
var errFastUnsupported = errors.New("fast schema: unsupported instance type")

// valid reports whether the library would accept v. false means "unknown
// or invalid": the caller must then ask the library.
func (f *fastValidator) valid(v any) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
		}
	}()
	return f.root.valid(v)
}

// compileFast builds the fast path for a compiled schema, or returns nil
// when the schema uses anything the fast path does not mirror exactly.
// compact is the schema document; unknownFormats the format names
// CompileSchema registered as annotations.
func compileFast(compact []byte, unknownFormats []string, d fdialect) *fastValidator {
	f, _ := buildFast(compact, unknownFormats, d)
	return f
}

// buildFast is compileFast that also says why there is no fast path.
func buildFast(compact []byte, unknownFormats []string, d fdialect) (*fastValidator, string) {
	dec := json.NewDecoder(bytes.NewReader(compact))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, "schema does not decode"
	}
	b := &fbuilder{annotationFormats: map[string]bool{}}
	for _, f := range unknownFormats {
		b.annotationFormats[f] = true
	}
	root := b.build(doc, nil, d)
	for _, n := range b.nodes {
		if n.refStr != "" && n.poison == "" {
			t, reason := b.resolveRef(n)
			if t == nil {
				n.refFail = reason
			} else {
				n.ref = t
			}
		}
	}
	if reason := b.check(root); reason != "" {
		return nil, reason
	}
	for _, n := range b.nodes {
		if n.hasObject {
			n.names = newNameTable(n)
		}
		n.plain = n.kind == kSchema && n.ref == nil && n.constVal == nil && len(n.enumOther) == 0 && n.format == nil &&
			len(n.allOf) == 0 && len(n.anyOf) == 0 && len(n.oneOf) == 0 && n.not == nil && n.ifN == nil
	}
	return &fastValidator{root: root}, ""
}

// ---------------------------------------------------------------------------
// Dialects (kaptinlin dialect.go)

type fdialect uint8

const (
	dialect2020 fdialect = iota
	dialect2019
	dialect7
	dialect6
	dialect4
)

func dialectOf(uri string, inherited fdialect) fdialect {
	switch strings.TrimSuffix(strings.TrimSpace(uri), "#") {
	case "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft/2020-12/schema":
		return dialect2020
	case "https://json-schema.org/draft/2019-09/schema", "http://json-schema.org/draft/2019-09/schema":
		return dialect2019
	case "https://json-schema.org/draft-07/schema", "http://json-schema.org/draft-07/schema":
		return dialect7
	case "https://json-schema.org/draft-06/schema", "http://json-schema.org/draft-06/schema":
		return dialect6
	case "https://json-schema.org/draft-04/schema", "http://json-schema.org/draft-04/schema":
		return dialect4
	}
	return inherited
}

func (d fdialect) uri() jsonschema.Dialect {
	switch d {
	case dialect2019:
		return jsonschema.Draft201909
	case dialect7:
		return jsonschema.Draft7
	case dialect6:
		return jsonschema.Draft6
	case dialect4:
		return jsonschema.Draft4
	}
	return jsonschema.Draft202012
}

func (d fdialect) refIgnoresSiblings() bool { return d == dialect7 || d == dialect6 || d == dialect4 }
func (d fdialect) legacyTupleItems() bool   { return d != dialect2020 }

// ---------------------------------------------------------------------------
// Compiled nodes

const (
	kSchema uint8 = iota
	kTrue
	kFalse
)

// Instance type bits ("number" in a schema admits integers too).
const (
	tNull uint8 = 1 << iota
	tBool
	tObject
	tArray
	tNumber
	tInteger
	tString
)

type fnode struct {
	kind    uint8
	poison  string // why this subschema has no fast path ("" = fine)
	refFail string // why its $ref has no fast target ("" = fine)
	parent  *fnode
	id      string // $id (or draft-04 id): the scope "#" resolves to
	dialect fdialect

	refStr  string
	ref     *fnode
	refOnly bool // drafts 4-7: siblings of $ref are not evaluated

	hasType bool
	types   uint8

	enumStrs  map[string]struct{} // string members of enum, when many
	enumList  []string            // string members of enum, when few
	enumOther []*cval             // the other members
	hasEnum   bool
	constVal  *cval
	allOf     []*fnode
	anyOf     []*fnode
	oneOf     []*fnode
	not       *fnode
	ifN       *fnode
	thenN     *fnode
	elseN     *fnode
	num       *numChecks
	hasMinLen bool
	hasMaxLen bool
	minLen    int
	maxLen    int
	pattern   *regexp.Regexp
	fixed     fixedPattern // pattern, when isFixed: checked by bytes
	isFixed   bool
	plain     bool // valid() of a string or number reads only its own keywords (validString, validNumber)
	format    func(any) bool
	hasArray  bool
	prefix    []*fnode
	items     *fnode
	minItems  *float64
	maxItems  *float64
	unique    bool
	hasObject bool
	props     map[string]*fnode
	names     *nameTable // props and required, for the one pass (stream.go)
	patProps  []patProp
	addl      *fnode
	required  []string
	minProps  *float64
	maxProps  *float64
	defs      map[string]*fnode
	patByKey  map[string]*fnode // patternProperties by pattern, for $ref pointers

	depRequired   map[string][]string // dependentRequired, and array "dependencies"
	depSchemas    map[string]*fnode   // dependentSchemas, and schema "dependencies"
	depFromLegacy bool                // they came from "dependencies"
}

type patProp struct {
	re   *regexp.Regexp
	node *fnode
}

type numChecks struct {
	multipleOf, minimum, maximum, exclMin, exclMax *fnum
}

// ---------------------------------------------------------------------------
// Builder

type fbuilder struct {
	nodes             []*fnode
	annotationFormats map[string]bool
}

// unsupportedKeywords are library keywords the fast path does not model.
var unsupportedKeywords = map[string]bool{
	"$anchor": true, "$dynamicAnchor": true, "$dynamicRef": true, "$vocabulary": true,
	"$recursiveRef": true, "$recursiveAnchor": true,
	"contains":    true,
	"minContains": true, "maxContains": true, "propertyNames": true,
	"unevaluatedItems": true, "unevaluatedProperties": true,
	"contentEncoding": true, "contentMediaType": true, "contentSchema": true,
}

// annotationKeywords are library keywords without validation effect.
var annotationKeywords = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// keywordTypes is the JSON type (as TypeName names it) these keywords'
// values must have, checked before buildObject's switch reads them (its
// cases assert the type); another type poisons the node: "<keyword> is
// not <type>".
var keywordTypes = map[string]string{
	"enum": "an array", "required": "an array", "prefixItems": "an array",
	"allOf": "an array", "anyOf": "an array", "oneOf": "an array",
	"pattern": "a string", "format": "a string", "uniqueItems": "a boolean",
	"patternProperties": "an object", "dependentRequired": "an object",
}

// TypeName names a decoded JSON value's type for messages: "a string",
// "an object", "null" (the schema keywords' and policies' messages).
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64:
		return "a number"
	case string:
		return "a string"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "an unsupported value"
}

func (b *fbuilder) newNode(parent *fnode, d fdialect) *fnode {
	n := &fnode{parent: parent, dialect: d}
	b.nodes = append(b.nodes, n)
	return n
}

// build compiles one subschema. A malformed document (which the library
// would not have compiled) poisons the node.
func (b *fbuilder) build(raw any, parent *fnode, inherited fdialect) *fnode {
	switch t := raw.(type) {
	case bool:
		n := b.newNode(parent, inherited)
		n.kind = kFalse
		if t {
			n.kind = kTrue
		}
		return n
	case map[string]any:
		return b.buildObject(t, parent, inherited)
	}
	n := b.newNode(parent, inherited)
	n.poison = "subschema is not an object or boolean"
	return n
}

func (b *fbuilder) buildObject(m map[string]any, parent *fnode, inherited fdialect) *fnode {
	d := inherited
	if v, ok := m["$schema"]; ok {
		s, isStr := v.(string)
		if !isStr {
			n := b.newNode(parent, inherited)
			n.poison = "$schema is not a string"
			return n
		}
		d = dialectOf(s, inherited)
	}
	n := b.newNode(parent, d)
	poison := func(reason string) {
		if n.poison == "" {
			n.poison = reason
		}
	}
	if v, ok := m["$id"]; ok {
		if s, isStr := v.(string); isStr {
			n.id = s
		} else {
			poison("$id is not a string")
		}
	}
	if v, ok := m["id"]; ok && d == dialect4 {
		if s, isStr := v.(string); isStr {
			if n.id == "" {
				n.id = s
			}
		} else {
			poison("id is not a string")
		}
	}
	// "definitions" is $defs only when $defs is absent (kaptinlin
	// Schema.UnmarshalJSON). $refs are resolved once the whole tree exists.
	if v, ok := m["$defs"]; ok {
		n.defs = b.buildMap(v, n, d, poison)
	} else if v, ok := m["definitions"]; ok {
		n.defs = b.buildMap(v, n, d, poison)
	}
	var legacyExclMin, legacyExclMax *bool
	var minimum, maximum *fnum
	for k, v := range m {
		if v == nil && !annotationKeywords[k] && k != "const" {
			// The library reads null keywords in surprising ways ("type":
			// null is a type named ""; "additionalItems": null is false).
			if knownKeyword(k, d) {
				poison("null value for " + k)
			}
			continue
		}
		if want, ok := keywordTypes[k]; ok && TypeName(v) != want {
			poison(k + " is not " + want)
			continue
		}
		switch k {
		case "$schema", "$id", "$defs", "definitions":
		case "id":
		case "$ref":
			s, isStr := v.(string)
			if !isStr || s == "" {
				poison("$ref is not a non-empty string")
				continue
			}
			n.refStr = s
			n.refOnly = d.refIgnoresSiblings()
		case "type":
			switch t := v.(type) {
			case string:
				n.hasType = true
				n.types |= typeBit(t)
			case []any:
				n.hasType = len(t) > 0 // the library ignores "type": []
				for _, e := range t {
					s, isStr := e.(string)
					if !isStr {
						poison("type member is not a string")
					}
					n.types |= typeBit(s)
				}
			default:
				poison("type is not a string or array")
			}
		case "enum":
			arr := v.([]any)
			n.hasEnum = len(arr) > 0 // an empty enum accepts everything
			var strs []string
			for _, e := range arr {
				if s, isStr := e.(string); isStr {
					strs = append(strs, s)
				} else {
					n.enumOther = append(n.enumOther, newCval(e))
				}
			}
			if len(strs) > 8 {
				n.enumStrs = make(map[string]struct{}, len(strs))
				for _, s := range strs {
					n.enumStrs[s] = struct{}{}
				}
			} else {
				n.enumList = strs
			}
		case "const":
			n.constVal = newCval(v)
		case "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			if bv, isBool := v.(bool); isBool && (k == "exclusiveMinimum" || k == "exclusiveMaximum") {
				if d != dialect4 {
					poison("boolean " + k + " outside draft-04")
					continue
				}
				if k == "exclusiveMinimum" {
					legacyExclMin = &bv
				} else {
					legacyExclMax = &bv
				}
				continue
			}
			jn, isNum := v.(json.Number)
			if !isNum {
				poison(k + " is not a number")
				continue
			}
			f := parseNum(string(jn))
			if f.unknown {
				poison(k + " is not a rational the library can parse")
				continue
			}
			f.rat() // cache for slow comparisons
			if n.num == nil {
				n.num = &numChecks{}
			}
			switch k {
			case "multipleOf":
				n.num.multipleOf = &f
			case "minimum":
				minimum = &f
			case "maximum":
				maximum = &f
			case "exclusiveMinimum":
				n.num.exclMin = &f
			case "exclusiveMaximum":
				n.num.exclMax = &f
			}
		case "minLength", "maxLength":
			f, ok := floatKeyword(v)
			if !ok {
				poison(k + " is not a number")
				continue
			}
			// The library compares against int(*float64), truncating (and
			// wrapping huge values the way the platform does).
			if k == "minLength" {
				n.hasMinLen, n.minLen = true, int(f)
			} else {
				n.hasMaxLen, n.maxLen = true, int(f)
			}
		case "minItems", "maxItems", "minProperties", "maxProperties":
			f, ok := floatKeyword(v)
			if !ok {
				poison(k + " is not a number")
				continue
			}
			switch k {
			case "minItems":
				n.minItems, n.hasArray = &f, true
			case "maxItems":
				n.maxItems, n.hasArray = &f, true
			case "minProperties":
				n.minProps, n.hasObject = &f, true
			case "maxProperties":
				n.maxProps, n.hasObject = &f, true
			}
		case "pattern":
			s := v.(string)
			re, err := compilePattern(s)
			if err != nil {
				poison("pattern does not compile")
				continue
			}
			n.pattern = re
			n.fixed, n.isFixed = compileFixedPattern(s)
		case "format":
			s := v.(string)
			if b.annotationFormats[s] {
				continue // registered by CompileSchema as always true
			}
			f, known := formatChecker(s)
			if !known {
				poison("format " + s + " is neither known nor an annotation")
				continue
			}
			n.format = f
		case "uniqueItems":
			n.unique = v.(bool)
			n.hasArray = true
		case "required":
			arr := v.([]any)
			for _, e := range arr {
				s, isStr := e.(string)
				if !isStr {
					poison("required member is not a string")
					continue
				}
				n.required = append(n.required, s)
			}
			if len(n.required) > 0 {
				n.hasObject = true
			}
		case "properties":
			n.props = b.buildMap(v, n, d, poison)
			n.hasObject = true
		case "patternProperties":
			pm := v.(map[string]any)
			n.patByKey = map[string]*fnode{}
			for p, sub := range pm {
				re, err := compilePattern(p)
				if err != nil {
					poison("patternProperties regexp does not compile")
					continue
				}
				if sub == nil {
					poison("null subschema")
					continue
				}
				c := b.build(sub, n, d)
				n.patProps = append(n.patProps, patProp{re: re, node: c})
				n.patByKey[p] = c
			}
			n.hasObject = true
		case "additionalProperties":
			n.addl = b.build(v, n, d)
			n.hasObject = true
		case "items":
			if arr, isArr := v.([]any); isArr {
				// Any draft: the library reads an array as prefixItems and
				// "additionalItems" as items.
				if _, both := m["prefixItems"]; both {
					poison("items array next to prefixItems")
					continue
				}
				n.prefix = b.buildSlice(arr, n, d, poison)
				if ai, ok := m["additionalItems"]; ok {
					if ai == nil {
						poison("null additionalItems")
						continue
					}
					n.items = b.build(ai, n, d)
				}
			} else {
				n.items = b.build(v, n, d)
			}
			n.hasArray = true
		case "additionalItems":
			// Read with an items array (above); otherwise the library drops it.
		case "prefixItems":
			arr := v.([]any)
			if it, ok := m["items"].([]any); ok && it != nil {
				continue // poisoned under "items"
			}
			n.prefix = b.buildSlice(arr, n, d, poison)
			n.hasArray = true
		case "allOf", "anyOf", "oneOf":
			arr := v.([]any)
			s := b.buildSlice(arr, n, d, poison)
			switch k {
			case "allOf":
				n.allOf = s
			case "anyOf":
				n.anyOf = s
			case "oneOf":
				n.oneOf = s
			}
		case "not":
			n.not = b.build(v, n, d)
		case "if":
			n.ifN = b.build(v, n, d)
		case "then":
			n.thenN = b.build(v, n, d)
		case "else":
			n.elseN = b.build(v, n, d)
		case "dependencies":
			if d == dialect2020 {
				continue // not a 2020-12 keyword: the library ignores it
			}
			_, hasDR := m["dependentRequired"]
			_, hasDS := m["dependentSchemas"]
			if hasDR || hasDS {
				poison("dependencies beside dependentRequired/dependentSchemas")
				continue
			}
			deps, isMap := v.(map[string]any)
			if !isMap {
				poison("dependencies is not an object")
				continue
			}
			n.depFromLegacy, n.hasObject = true, true
			for name, dep := range deps {
				if arr, isArr := dep.([]any); isArr {
					n.addDepRequired(name, arr, poison)
				} else if dep == nil {
					poison("null dependency")
				} else {
					if n.depSchemas == nil {
						n.depSchemas = map[string]*fnode{}
					}
					n.depSchemas[name] = b.build(dep, n, d)
				}
			}
		case "dependentRequired":
			deps := v.(map[string]any)
			n.hasObject = true
			for name, dep := range deps {
				arr, isArr := dep.([]any)
				if !isArr {
					poison("dependentRequired member is not an array")
					continue
				}
				n.addDepRequired(name, arr, poison)
			}
		case "dependentSchemas":
			n.depSchemas = b.buildMap(v, n, d, poison)
			n.hasObject = true
		default:
			if unsupportedKeywords[k] {
				poison(k)
			}
			// annotations and extension keywords: no effect
		}
	}
	// Draft-04 boolean exclusive bounds (kaptinlin applyLegacyExclusiveBounds).
	if legacyExclMin != nil && *legacyExclMin && minimum != nil {
		n.num.exclMin, minimum = minimum, nil
	}
	if legacyExclMax != nil && *legacyExclMax && maximum != nil {
		n.num.exclMax, maximum = maximum, nil
	}
	if n.num != nil {
		n.num.minimum, n.num.maximum = minimum, maximum
		if n.num.minimum == nil && n.num.maximum == nil && n.num.exclMin == nil && n.num.exclMax == nil && n.num.multipleOf == nil {
			n.num = nil
		}
	}
	return n
}

// knownKeyword reports whether the library reads k (so that a null value
// for it matters).
func knownKeyword(k string, d fdialect) bool {
	switch k {
	case "$schema", "$id", "$ref", "$defs", "definitions", "type", "enum", "multipleOf",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
		"minItems", "maxItems", "minProperties", "maxProperties", "pattern", "format",
		"uniqueItems", "required", "properties", "patternProperties", "additionalProperties",
		"items", "additionalItems", "prefixItems", "allOf", "anyOf", "oneOf", "not", "if",
		"then", "else":
		return true
	case "id":
		return d == dialect4
	case "dependencies":
		return d != dialect2020
	case "dependentRequired", "dependentSchemas":
		return true
	}
	return unsupportedKeywords[k]
}

func (n *fnode) addDepRequired(name string, arr []any, poison func(string)) {
	if n.depRequired == nil {
		n.depRequired = map[string][]string{}
	}
	names := make([]string, 0, len(arr))
	for _, e := range arr {
		s, isStr := e.(string)
		if !isStr {
			poison("dependency member is not a string")
			return
		}
		names = append(names, s)
	}
	n.depRequired[name] = names
}

func typeBit(t string) uint8 {
	switch t {
	case "null":
		return tNull
	case "boolean":
		return tBool
	case "object":
		return tObject
	case "array":
		return tArray
	case "number":
		return tNumber | tInteger
	case "integer":
		return tInteger
	case "string":
		return tString
	}
	return 0 // the library matches no instance against an unknown type name
}

func floatKeyword(v any) (float64, bool) {
	jn, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(jn), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

func (b *fbuilder) buildMap(v any, parent *fnode, d fdialect, poison func(string)) map[string]*fnode {
	m, ok := v.(map[string]any)
	if !ok {
		poison("schema map is not an object")
		return nil
	}
	out := make(map[string]*fnode, len(m))
	for k, sub := range m {
		if sub == nil {
			poison("null subschema")
			continue
		}
		out[k] = b.build(sub, parent, d)
	}
	return out
}

func (b *fbuilder) buildSlice(arr []any, parent *fnode, d fdialect, poison func(string)) []*fnode {
	out := make([]*fnode, 0, len(arr))
	for _, sub := range arr {
		if sub == nil {
			poison("null subschema")
			continue
		}
		out = append(out, b.build(sub, parent, d))
	}
	return out
}

// ---------------------------------------------------------------------------
// $ref resolution (kaptinlin ref.go: resolveRef / resolveAnchor /
// resolveJSONPointer / schemaForPointerSegment)

func (b *fbuilder) resolveRef(n *fnode) (*fnode, string) {
	ref := n.refStr
	if ref == "#" {
		return n.scope(), ""
	}
	anchor, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, "$ref is not local: " + ref
	}
	if !isPointer(anchor) {
		return nil, "$ref to a named anchor: " + ref
	}
	for s := n; s != nil; s = s.parent {
		t, opaque := s.resolvePointer(anchor)
		if opaque {
			return nil, "$ref through a keyword the fast path does not model: " + ref
		}
		if t != nil {
			return t, ""
		}
	}
	return nil, "$ref does not resolve: " + ref
}

func (n *fnode) scope() *fnode {
	for s := n; ; s = s.parent {
		if s.id != "" || s.parent == nil {
			return s
		}
	}
}

func isPointer(s string) bool {
	if s == "" || s[0] != '/' {
		return false
	}
	_, ok := pointerTokens(s)
	return ok
}

func pointerTokens(p string) ([]string, bool) {
	toks, err := PointerTokens(p)
	return toks, err == nil
}

// resolvePointer walks a pointer from n. opaque reports that the walk met a
// keyword the library models but this builder does not, so the library's
// target is unknown here.
func (n *fnode) resolvePointer(ptr string) (t *fnode, opaque bool) {
	if ptr == "/" {
		return n, false
	}
	decoded, err := url.PathUnescape(ptr)
	if err != nil {
		return nil, false
	}
	segs, ok := pointerTokens(decoded)
	if !ok {
		return nil, false
	}
	cur := n
	for i := 0; i < len(segs); i++ {
		if cur.kind != kSchema {
			return nil, false // boolean schemas have no keywords
		}
		if cur.poison != "" {
			// A poisoned subschema may lack children the library has.
			return nil, true
		}
		var next *fnode
		mapNext := func(m map[string]*fnode) {
			if len(m) == 0 || i+1 >= len(segs) {
				return
			}
			i++
			next = m[segs[i]]
		}
		sliceNext := func(s []*fnode) {
			if i+1 >= len(segs) {
				return
			}
			i++
			k, err := strconv.Atoi(segs[i])
			if err != nil || k < 0 || k >= len(s) {
				return
			}
			next = s[k]
		}
		switch segs[i] {
		case "properties":
			mapNext(cur.props)
		case "patternProperties":
			mapNext(cur.patByKey)
		case "$defs", "definitions":
			mapNext(cur.defs)
		case "prefixItems":
			sliceNext(cur.prefix)
		case "allOf":
			sliceNext(cur.allOf)
		case "anyOf":
			sliceNext(cur.anyOf)
		case "oneOf":
			sliceNext(cur.oneOf)
		case "not":
			next = cur.not
		case "if":
			next = cur.ifN
		case "then":
			next = cur.thenN
		case "else":
			next = cur.elseN
		case "items":
			if cur.dialect.legacyTupleItems() && len(cur.prefix) > 0 {
				sliceNext(cur.prefix)
			} else {
				next = cur.items
			}
		case "additionalProperties":
			next = cur.addl
		case "dependentSchemas":
			if cur.depFromLegacy {
				return nil, true // where the library files them is not modelled
			}
			mapNext(cur.depSchemas)
		case "contains", "propertyNames", "unevaluatedItems",
			"unevaluatedProperties", "contentSchema":
			// Not modelled: present only on poisoned nodes (handled above),
			// so absent here, which the library calls not found too.
		}
		if next == nil {
			return nil, false
		}
		cur = next
	}
	return cur, false
}

// ---------------------------------------------------------------------------
// Reachability and cycles

// evalEdges lists the subschemas evaluating n may evaluate.
func (n *fnode) evalEdges(yield func(c *fnode, inPlace bool)) {
	if n.kind != kSchema {
		return
	}
	if n.ref != nil {
		yield(n.ref, true)
	}
	if n.refOnly {
		return
	}
	for _, c := range n.allOf {
		yield(c, true)
	}
	for _, c := range n.anyOf {
		yield(c, true)
	}
	for _, c := range n.oneOf {
		yield(c, true)
	}
	for _, c := range []*fnode{n.not, n.ifN, n.thenN, n.elseN} {
		if c != nil {
			yield(c, true)
		}
	}
	for _, c := range n.depSchemas {
		yield(c, true) // applied to the object itself
	}
	for _, c := range n.props {
		yield(c, false)
	}
	for _, p := range n.patProps {
		yield(p.node, false)
	}
	for _, c := range n.prefix {
		yield(c, false)
	}
	for _, c := range []*fnode{n.addl, n.items} {
		if c != nil {
			yield(c, false)
		}
	}
}

// check accepts the tree ("") when no reachable subschema is poisoned and no
// cycle of in-place applicators exists (the library breaks those with a
// reduced evaluation the fast path does not mirror).
func (b *fbuilder) check(root *fnode) string {
	reach := map[*fnode]bool{}
	stack := []*fnode{root}
	reach[root] = true
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.poison != "" {
			return n.poison
		}
		if n.refFail != "" {
			return n.refFail
		}
		n.evalEdges(func(c *fnode, _ bool) {
			if !reach[c] {
				reach[c] = true
				stack = append(stack, c)
			}
		})
	}
	// Cycle detection over in-place edges among reachable nodes.
	const (
		white = iota
		grey
		black
	)
	color := map[*fnode]int{}
	var visit func(n *fnode) bool
	visit = func(n *fnode) bool {
		color[n] = grey
		ok := true
		n.evalEdges(func(c *fnode, inPlace bool) {
			if !ok || !inPlace {
				return
			}
			switch color[c] {
			case grey:
				ok = false
			case white:
				ok = visit(c)
			}
		})
		color[n] = black
		return ok
	}
	for n := range reach {
		if color[n] == white && !visit(n) {
			return "cycle of in-place applicators"
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// Evaluation

func (n *fnode) valid(v any) bool {
	switch n.kind {
	case kTrue:
		return true
	case kFalse:
		return false
	}
	if n.ref != nil {
		if !n.ref.valid(v) {
			return false
		}
		if n.refOnly {
			return true
		}
	}

	var t uint8
	var num fnum
	switch x := v.(type) {
	case string:
		t = tString
	case map[string]any:
		t = tObject
	case []any:
		t = tArray
	case json.Number:
		num = parseNum(string(x))
		t = num.typ()
	case bool:
		t = tBool
	case nil:
		t = tNull
	default:
		panic(errFastUnsupported)
	}

	if n.hasType && n.types&t == 0 {
		return false
	}
	if n.constVal != nil && !equalCval(v, &num, n.constVal) {
		return false
	}
	if n.hasEnum && !n.enumHas(v, &num) {
		return false
	}

	switch t {
	case tString:
		if !n.validStr(v.(string)) {
			return false
		}
	case tInteger, tNumber:
		if n.num != nil && !n.num.valid(&num) {
			return false
		}
	case tObject:
		if n.hasObject && !n.validObject(v.(map[string]any)) {
			return false
		}
	case tArray:
		if n.hasArray && !n.validArray(v.([]any)) {
			return false
		}
	}
	if n.format != nil && !n.format(v) {
		return false
	}

	for _, c := range n.allOf {
		if !c.valid(v) {
			return false
		}
	}
	if len(n.anyOf) > 0 {
		matched := false
		for _, c := range n.anyOf {
			if c.valid(v) {
				matched = true
				break
			}
		}
		if !matched {
			return false
		}
	}
	if len(n.oneOf) > 0 {
		matches := 0
		for _, c := range n.oneOf {
			if c.valid(v) {
				matches++
				if matches > 1 {
					return false
				}
			}
		}
		if matches != 1 {
			return false
		}
	}
	if n.not != nil && n.not.valid(v) {
		return false
	}
	if n.ifN != nil {
		if n.ifN.valid(v) {
			if n.thenN != nil && !n.thenN.valid(v) {
				return false
			}
		} else if n.elseN != nil && !n.elseN.valid(v) {
			return false
		}
	}
	return true
}

// validString is valid(s) at a plain node, without s in an interface.
func (n *fnode) validString(s string) bool {
	return (!n.hasType || n.types&tString != 0) && (!n.hasEnum || n.enumHasString(s)) && n.validStr(s)
}

// validNumber is valid(json.Number(s)) at a plain node, whose enum (it
// holds strings only) no number is in.
func (n *fnode) validNumber(s string) bool {
	num := parseNum(s)
	t := num.typ()
	return (!n.hasType || n.types&t != 0) && !n.hasEnum && (t == 0 || n.num == nil || n.num.valid(&num))
}

// validStr applies a string's own keywords: lengths and pattern.
func (n *fnode) validStr(s string) bool {
	return (!n.hasMinLen && !n.hasMaxLen || n.validLen(s)) && (n.pattern == nil || n.matchPattern(s))
}

// validLen applies minLength and maxLength to s. RuneCountInString
// counts between ceil(len/4) runes (each at most 4 bytes) and len (an
// invalid byte counts as one), so the byte length decides without
// counting when both bounds are on one side of that range: a string
// within maxLength bytes and with minLength*4 bytes or more passes.
func (n *fnode) validLen(s string) bool {
	lo, hi := (len(s)+3)/4, len(s)
	if (!n.hasMinLen || lo >= n.minLen) && (!n.hasMaxLen || hi <= n.maxLen) {
		return true
	}
	if n.hasMinLen && hi < n.minLen || n.hasMaxLen && lo > n.maxLen {
		return false
	}
	l := utf8.RuneCountInString(s)
	return (!n.hasMinLen || l >= n.minLen) && (!n.hasMaxLen || l <= n.maxLen)
}

// enumHasString reports whether s is one of the enum's strings.
func (n *fnode) enumHasString(s string) bool {
	if n.enumStrs != nil {
		_, hit := n.enumStrs[s]
		return hit
	}
	for _, e := range n.enumList {
		if e == s {
			return true
		}
	}
	return false
}

// matchPattern is pattern.MatchString(s), by bytes when it is fixed.
func (n *fnode) matchPattern(s string) bool {
	if n.isFixed {
		return n.fixed.match(s)
	}
	return n.pattern.MatchString(s)
}

func (n *fnode) enumHas(v any, num *fnum) bool {
	if s, ok := v.(string); ok {
		return n.enumHasString(s)
	}
	for _, c := range n.enumOther {
		if equalCval(v, num, c) {
			return true
		}
	}
	return false
}

func (n *fnode) validObject(m map[string]any) bool {
	if n.minProps != nil && float64(len(m)) < *n.minProps {
		return false
	}
	if n.maxProps != nil && float64(len(m)) > *n.maxProps {
		return false
	}
	for _, r := range n.required {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	for k, req := range n.depRequired {
		if _, ok := m[k]; ok {
			for _, r := range req {
				if _, ok := m[r]; !ok {
					return false
				}
			}
		}
	}
	for k, c := range n.depSchemas {
		if _, ok := m[k]; ok && !c.valid(m) {
			return false
		}
	}
	if n.addl != nil || len(n.patProps) > 0 {
		addlFalse := n.addl != nil && n.addl.kind == kFalse
		for k, val := range m {
			matched := false
			if p, ok := n.props[k]; ok {
				matched = true
				if !p.valid(val) {
					return false
				}
			}
			for _, pp := range n.patProps {
				if pp.re.MatchString(k) {
					matched = true
					if !pp.node.valid(val) {
						return false
					}
				}
			}
			if !matched && n.addl != nil {
				if addlFalse || !n.addl.valid(val) {
					return false
				}
			}
		}
		return true
	}
	if len(n.props) > 0 {
		if len(m) <= len(n.props) {
			for k, val := range m {
				if p, ok := n.props[k]; ok && !p.valid(val) {
					return false
				}
			}
		} else {
			for k, p := range n.props {
				if val, ok := m[k]; ok && !p.valid(val) {
					return false
				}
			}
		}
	}
	return true
}

func (n *fnode) validArray(a []any) bool {
	if n.minItems != nil && float64(len(a)) < *n.minItems {
		return false
	}
	if n.maxItems != nil && float64(len(a)) > *n.maxItems {
		return false
	}
	for i, c := range n.prefix {
		if i >= len(a) {
			break
		}
		if !c.valid(a[i]) {
			return false
		}
	}
	if n.items != nil {
		for i := len(n.prefix); i < len(a); i++ {
			if !n.items.valid(a[i]) {
				return false
			}
		}
	}
	if n.unique {
		limit := len(a)
		// The library checks only the prefixItems part when items is false.
		if n.items != nil && n.items.kind == kFalse {
			limit = min(len(n.prefix), len(a))
		}
		if !uniqueInstances(a[:limit]) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Numbers

// fnum is a JSON number. The fast form is ±mant/10^scale, normalised (no
// trailing zero digits in mant while scale > 0; zero is +0/1); other
// numbers keep the library's big.Rat (unknown when it cannot parse them).
type fnum struct {
	fast    bool
	unknown bool
	neg     bool
	scale   uint8 // 0..19
	mant    uint64
	r       *big.Rat // slow form, or the cached rational of a schema bound
}

var pow10 = [...]uint64{
	1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
	1e15, 1e16, 1e17, 1e18, 1e19,
}

// parseNum reads a JSON number's text. Valid JSON numbers with at most 19
// significant digits, |exponent| < 10^4 and at most 1000 fraction digits
// take the fast form (big.Rat.SetString always succeeds on those); anything
// else goes the library's way: jsonNumberToken, then big.Rat.SetString.
func parseNum(s string) fnum {
	if f, ok := parseFastNum(s); ok {
		return f
	}
	return slowNum(s)
}

func parseFastNum(s string) (fnum, bool) {
	if f, ok := parseShortNum(s); ok {
		return f, true
	}
	return parseLongNum(s)
}

// parseShortNum is parseLongNum in one pass for what outputs mostly hold:
// at most 19 bytes after the sign, no exponent (an integer of up to 19
// digits, a decimal of up to 18: the mantissa fits in a uint64); false
// for anything else.
func parseShortNum(s string) (f fnum, ok bool) {
	i := 0
	if len(s) > 0 && s[0] == '-' {
		f.neg = true
		i++
	}
	if i == len(s) || len(s)-i > 19 {
		return f, false
	}
	var m uint64
	switch c := s[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			m = m*10 + uint64(s[i]-'0')
		}
	default:
		return f, false
	}
	scale := 0
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			m = m*10 + uint64(s[i]-'0')
			scale++
		}
		if scale == 0 {
			return f, false
		}
	}
	if i != len(s) {
		return f, false
	}
	if m == 0 {
		return fnum{fast: true}, true
	}
	for scale > 0 && m%10 == 0 {
		m /= 10
		scale--
	}
	f.fast, f.mant, f.scale = true, m, uint8(scale)
	return f, true
}

// parseLongNum is parseFastNum for any number.
func parseLongNum(s string) (fnum, bool) {
	var f fnum
	i := 0
	if i < len(s) && s[i] == '-' {
		f.neg = true
		i++
	}
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intEnd := i
	if intEnd == intStart || (s[intStart] == '0' && intEnd-intStart > 1) {
		return f, false
	}
	fracStart, fracEnd := i, i
	if i < len(s) && s[i] == '.' {
		i++
		fracStart = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		fracEnd = i
		if fracEnd == fracStart || fracEnd-fracStart > 1000 {
			return f, false
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			exp = exp*10 + int(s[i]-'0')
			i++
			if i-es > 4 {
				return f, false
			}
		}
		if i == es {
			return f, false
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return f, false
	}
	for fracEnd > fracStart && s[fracEnd-1] == '0' {
		fracEnd--
	}
	var m uint64
	sig := 0
	for j := intStart; j < fracEnd; j++ {
		c := s[j]
		if c == '.' {
			continue
		}
		d := uint64(c - '0')
		if m == 0 && d == 0 {
			continue
		}
		sig++
		if sig > 19 {
			return f, false
		}
		m = m*10 + d
	}
	scale := (fracEnd - fracStart) - exp
	if m == 0 {
		return fnum{fast: true}, true
	}
	if scale < 0 {
		if -scale > 19 {
			return f, false
		}
		hi, lo := bits.Mul64(m, pow10[-scale])
		if hi != 0 {
			return f, false
		}
		m, scale = lo, 0
	}
	for scale > 0 && m%10 == 0 {
		m /= 10
		scale--
	}
	if scale > 19 {
		return f, false
	}
	f.fast, f.mant, f.scale = true, m, uint8(scale)
	return f, true
}

func slowNum(s string) fnum {
	raw := jsontext.Value(s)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) ||
		raw[len(raw)-1] < '0' || raw[len(raw)-1] > '9' || raw.Kind() != '0' || !raw.IsValid() {
		return fnum{unknown: true}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return fnum{unknown: true}
	}
	return fnum{r: r}
}

// typ is the number's instance type: tInteger, tNumber, or 0 when the
// library cannot parse it (it matches no type then).
func (f *fnum) typ() uint8 {
	switch {
	case f.unknown:
		return 0
	case f.isInt():
		return tInteger
	}
	return tNumber
}

func (f *fnum) isInt() bool {
	if f.fast {
		return f.scale == 0
	}
	return f.r.IsInt()
}

// rat returns the exact value (cached).
func (f *fnum) rat() *big.Rat {
	if f.r == nil {
		num := new(big.Int).SetUint64(f.mant)
		if f.neg {
			num.Neg(num)
		}
		f.r = new(big.Rat).SetFrac(num, new(big.Int).SetUint64(pow10[f.scale]))
	}
	return f.r
}

// cmpNum compares two known numbers exactly.
func cmpNum(a, b *fnum) int {
	if a.fast && b.fast {
		return cmpFast(a, b)
	}
	return a.rat().Cmp(b.rat())
}

func cmpFast(a, b *fnum) int {
	sa, sb := a.sign(), b.sign()
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	s := max(a.scale, b.scale)
	ah, al := bits.Mul64(a.mant, pow10[s-a.scale])
	bh, bl := bits.Mul64(b.mant, pow10[s-b.scale])
	c := 0
	switch {
	case ah != bh:
		c = cmpU(ah, bh)
	default:
		c = cmpU(al, bl)
	}
	return c * sa
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *fnum) sign() int {
	switch {
	case f.fast && f.mant == 0:
		return 0
	case f.fast && f.neg:
		return -1
	case f.fast:
		return 1
	}
	return f.r.Sign()
}

// multipleOf mirrors evaluateMultipleOf: the divisor must be > 0, and
// value/divisor an integer.
func isMultiple(v, m *fnum) bool {
	if m.sign() <= 0 {
		return false
	}
	if v.fast && m.fast {
		if v.mant == 0 {
			return true
		}
		s := max(v.scale, m.scale)
		ah, al := bits.Mul64(v.mant, pow10[s-v.scale])
		bh, bl := bits.Mul64(m.mant, pow10[s-m.scale])
		if bh == 0 {
			return bits.Rem64(ah, al, bl) == 0
		}
	}
	return new(big.Rat).Quo(v.rat(), m.rat()).IsInt()
}

func (c *numChecks) valid(v *fnum) bool {
	if c.multipleOf != nil && !isMultiple(v, c.multipleOf) {
		return false
	}
	if c.maximum != nil && cmpNum(v, c.maximum) > 0 {
		return false
	}
	if c.exclMax != nil && cmpNum(v, c.exclMax) >= 0 {
		return false
	}
	if c.minimum != nil && cmpNum(v, c.minimum) < 0 {
		return false
	}
	if c.exclMin != nil && cmpNum(v, c.exclMin) <= 0 {
		return false
	}
	return true
}

// ---------------------------------------------------------------------------
// JSON equality (kaptinlin deepEqualJSON)

const (
	cvNull uint8 = iota
	cvBool
	cvString
	cvNumber
	cvArray
	cvObject
)

// cval is a schema-side JSON value (enum member, const) with its numbers
// parsed once.
type cval struct {
	kind uint8
	b    bool
	s    string
	num  fnum
	arr  []*cval
	obj  map[string]*cval
}

func newCval(v any) *cval {
	switch t := v.(type) {
	case nil:
		return &cval{kind: cvNull}
	case bool:
		return &cval{kind: cvBool, b: t}
	case string:
		return &cval{kind: cvString, s: t}
	case json.Number:
		c := &cval{kind: cvNumber, num: parseNum(string(t))}
		if !c.num.unknown {
			c.num.rat()
		}
		return c
	case []any:
		c := &cval{kind: cvArray, arr: make([]*cval, len(t))}
		for i, e := range t {
			c.arr[i] = newCval(e)
		}
		return c
	case map[string]any:
		c := &cval{kind: cvObject, obj: make(map[string]*cval, len(t))}
		for k, e := range t {
			c.obj[k] = newCval(e)
		}
		return c
	}
	panic("fast schema: unexpected schema value type")
}

// equalCval compares an instance value with a schema value. num is the
// instance's parsed number when v is a json.Number (nil: parse it here).
func equalCval(v any, num *fnum, c *cval) bool {
	switch x := v.(type) {
	case json.Number:
		if c.kind != cvNumber {
			return false
		}
		var n fnum
		if num != nil {
			n = *num
		} else {
			n = parseNum(string(x))
		}
		if n.unknown || c.num.unknown {
			return false
		}
		return cmpNum(&n, &c.num) == 0
	case string:
		return c.kind == cvString && c.s == x
	case bool:
		return c.kind == cvBool && c.b == x
	case nil:
		return c.kind == cvNull
	case []any:
		if c.kind != cvArray || len(c.arr) != len(x) {
			return false
		}
		for i, e := range x {
			if !equalCval(e, nil, c.arr[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		if c.kind != cvObject || len(c.obj) != len(x) {
			return false
		}
		for k, e := range x {
			ce, ok := c.obj[k]
			if !ok || !equalCval(e, nil, ce) {
				return false
			}
		}
		return true
	}
	panic(errFastUnsupported)
}

// equalInstances is deepEqualJSON between two decoded instance values.
func equalInstances(a, b any) bool {
	if !isDecodedType(b) {
		panic(errFastUnsupported)
	}
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		na, nb := parseNum(string(x)), parseNum(string(y))
		return !na.unknown && !nb.unknown && cmpNum(&na, &nb) == 0
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalInstances(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !equalInstances(e, f) {
				return false
			}
		}
		return true
	}
	panic(errFastUnsupported)
}

func isDecodedType(v any) bool {
	switch v.(type) {
	case nil, bool, string, json.Number, []any, map[string]any:
		return true
	}
	return false
}

var uniqueSeed = maphash.MakeSeed()

// uniqueInstances reports that no two items are equal (evaluateUniqueItems).
func uniqueInstances(a []any) bool {
	if len(a) <= 1 {
		return true
	}
	if len(a) <= 16 {
		for i := 1; i < len(a); i++ {
			for j := 0; j < i; j++ {
				if equalInstances(a[i], a[j]) {
					return false
				}
			}
		}
		return true
	}
	buckets := make(map[uint64][]int, len(a))
	for i, v := range a {
		h := hashInstance(v)
		for _, j := range buckets[h] {
			if equalInstances(v, a[j]) {
				return false
			}
		}
		buckets[h] = append(buckets[h], i)
	}
	return true
}

// hashInstance hashes a value so that equal values (by equalInstances)
// hash equal: numbers by their float64 rounding (a function of the exact
// value), objects order-independently.
func hashInstance(v any) uint64 {
	var h maphash.Hash
	h.SetSeed(uniqueSeed)
	writeInstanceHash(&h, v)
	return h.Sum64()
}

func writeInstanceHash(h *maphash.Hash, v any) {
	var buf [9]byte
	switch x := v.(type) {
	case nil:
		h.WriteByte(0)
	case bool:
		if x {
			h.WriteByte(1)
		} else {
			h.WriteByte(2)
		}
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		if f == 0 {
			f = 0 // -0 and 0 are one value
		}
		buf[0] = 3
		binary.LittleEndian.PutUint64(buf[1:], math.Float64bits(f))
		h.Write(buf[:])
	case string:
		buf[0] = 4
		binary.LittleEndian.PutUint64(buf[1:], uint64(len(x)))
		h.Write(buf[:])
		h.WriteString(x)
	case []any:
		buf[0] = 5
		binary.LittleEndian.PutUint64(buf[1:], uint64(len(x)))
		h.Write(buf[:])
		for _, e := range x {
			writeInstanceHash(h, e)
		}
	case map[string]any:
		var sum uint64
		for k, e := range x {
			var eh maphash.Hash
			eh.SetSeed(uniqueSeed)
			eh.WriteString(k)
			eh.WriteByte(0xff)
			writeInstanceHash(&eh, e)
			sum += eh.Sum64()
		}
		buf[0] = 6
		binary.LittleEndian.PutUint64(buf[1:], sum)
		h.Write(buf[:])
	default:
		panic(errFastUnsupported)
	}
}
