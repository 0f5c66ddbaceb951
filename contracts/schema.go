package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/kaptinlin/jsonschema"
)

// Schema is a compiled contract schema. It never touches the network: the
// compiler's http/https loaders are removed and every $ref must resolve
// inside the document at compile time.
type Schema struct {
	s       *jsonschema.Schema
	raw     map[string]any // the decoded schema document
	norm    map[string]any // the document the validator compiled (dialect.go)
	compact []byte         // compact JSON, keys in file order, no HTML escaping
	libDoc  []byte         // norm as JSON (compact itself when nothing changed)
	// UnknownFormats lists format names (and "contentMediaType X" /
	// "contentEncoding X") the validator does not know. They are annotations
	// only (asserting them would reject every value, e.g. OpenAPI's int32);
	// config validation warns about them.
	UnknownFormats []string
	// DialectWarnings name keywords the declared draft does not have
	// ("at #/pointer: message"); config validation warns about them.
	DialectWarnings []string
	// fast is the fast-path validator (fastschema.go); nil when the schema
	// uses anything it does not mirror, and then the library alone judges.
	fast *fastValidator
	// dialect is the draft of a schema that declares none.
	dialect fdialect
	// patterns maps the patterns rewritten for ECMA-262 \s back to the
	// user's, for violation messages.
	patterns map[string]string
}

// ErrRemoteRef is wrapped by CompileSchema when a $ref would need a fetch.
var ErrRemoteRef = errors.New("schema references a remote or unresolved $ref")

// CompileSchema compiles a JSON Schema with format assertion on. Each
// (sub)schema is judged by the draft its $schema names (draft 2020-12 when
// none does; dialect.go).
func CompileSchema(doc []byte) (*Schema, error) {
	return compileSchema(doc, compileOptions{})
}

// compileOptions are for tests: the official test suite's schemas declare
// no $schema (their directory names the draft) and refer to documents it
// ships beside them.
type compileOptions struct {
	dialect fdialect                                // when a schema declares none
	loader  func(url string) (io.ReadCloser, error) // for http URLs; nil: refused
}

func compileSchema(doc []byte, opts compileOptions) (*Schema, error) {
	compact, err := compactJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	var raw any
	if err := json.Unmarshal(compact, &raw); err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	switch raw.(type) {
	case map[string]any, bool:
	default:
		return nil, errors.New("schema must be a JSON object or boolean")
	}
	// The validator and the fast path compile the document as the drafts
	// it declares read it (dialect.go).
	libDoc, norm, err := normalizeSchemaBytes(compact, opts.dialect)
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	if norm.refused != nil {
		return nil, fmt.Errorf("schema does not compile: %w", norm.refused)
	}
	c := jsonschema.NewCompiler()
	c.SetAssertFormat(true)
	// The library fetches remote $refs through these loaders; a contract must
	// be self-contained, so there is nothing to load from.
	for scheme := range c.Loaders {
		delete(c.Loaders, scheme)
	}
	c.Loaders["http"] = refuseLoader
	c.Loaders["https"] = refuseLoader
	if opts.loader != nil {
		c.Loaders["http"] = opts.loader
	}
	c.SetDefaultDialect(opts.dialect.uri())
	// Unknown formats, media types and encodings would fail every value
	// when asserted; draft 2020-12 treats them as annotations.
	unknown := unknownFormats(norm.doc)
	for _, f := range unknown {
		c.RegisterFormat(f, func(any) bool { return true })
	}
	for name, check := range formatOverrides {
		c.RegisterFormat(name, check)
	}
	for _, mt := range collectStrings(norm.doc, "contentMediaType") {
		if _, ok := c.MediaTypes[mt]; !ok {
			c.RegisterMediaType(mt, func(b []byte) (any, error) { return string(b), nil })
			unknown = append(unknown, "contentMediaType "+mt)
		}
	}
	for _, enc := range collectStrings(norm.doc, "contentEncoding") {
		if _, ok := c.Decoders[enc]; !ok {
			c.RegisterDecoder(enc, func(s string) ([]byte, error) { return []byte(s), nil })
			unknown = append(unknown, "contentEncoding "+enc)
		}
	}
	s, err := compileNoPanic(c, libDoc)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %w", err)
	}
	if refs := s.UnresolvedReferenceURIs(); len(refs) > 0 {
		slices.Sort(refs)
		return nil, fmt.Errorf("%w: %s", ErrRemoteRef, strings.Join(slices.Compact(refs), ", "))
	}
	m, _ := raw.(map[string]any)
	nm, _ := norm.doc.(map[string]any)
	return &Schema{s: s, raw: m, norm: nm, compact: compact, libDoc: libDoc,
		UnknownFormats: unknown, DialectWarnings: norm.warnings, patterns: norm.patterns,
		// Fast path (fastschema.go): built from the same document.
		fast: compileFast(libDoc, unknown, opts.dialect), dialect: opts.dialect}, nil
}

// normalizeSchemaBytes decodes a compact schema document (numbers as
// written) and rewrites it for its declared drafts. The bytes are compact
// itself when nothing changed.
func normalizeSchemaBytes(compact []byte, d fdialect) ([]byte, dialectResult, error) {
	dec := json.NewDecoder(bytes.NewReader(compact))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, dialectResult{}, err
	}
	norm := normalizeDialects(doc, d)
	if !norm.changed {
		return compact, norm, nil
	}
	b, err := encodeSchemaDoc(norm.doc)
	return b, norm, err
}

// unknownFormats lists "format" names in the document that the validator
// has no checker for.
func unknownFormats(doc any) []string {
	var out []string
	for _, f := range collectStrings(doc, "format") {
		if _, known := formatChecker(f); !known {
			out = append(out, f)
		}
	}
	return out
}

// collectStrings returns the sorted, distinct string values of keyword kw
// anywhere in a schema document.
func collectStrings(doc any, kw string) []string {
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			if f, ok := t[kw].(string); ok {
				seen[f] = true
			}
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(doc)
	return slices.Sorted(maps.Keys(seen))
}

func refuseLoader(url string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("%w: %s (schemas are never fetched)", ErrRemoteRef, url)
}

func compileNoPanic(c *jsonschema.Compiler, doc []byte) (s *jsonschema.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("compiler panic: %v", r)
		}
	}()
	return c.Compile(doc)
}

// compactJSON removes insignificant whitespace and keeps key order and
// escapes as written, so {{ schema }} prints what the user wrote.
func compactJSON(doc []byte) ([]byte, error) {
	v := jsontext.Value(bytes.Clone(doc))
	if err := v.Compact(); err != nil {
		return nil, err
	}
	return []byte(v), nil
}

// JSON is the schema as compact JSON in file key order.
func (s *Schema) JSON() []byte { return s.compact }

// Doc is the decoded schema document (map for object schemas, nil for
// boolean schemas). Callers must not modify it.
func (s *Schema) Doc() map[string]any { return s.raw }

// Validate judges a decoded instance and returns only the violations that
// make it invalid, unsorted.
func (s *Schema) Validate(v any) []Violation {
	vs, _ := s.validate(v)
	return vs
}

// validate is Validate, also reporting whether the library ran.
func (s *Schema) validate(v any) ([]Violation, bool) {
	// Fast path (fastschema.go): a valid verdict from it is the library's;
	// otherwise the library runs and names the violations.
	if s.fast != nil && s.fast.valid(v) {
		return nil, false
	}
	return s.validateLibrary(v), true
}

// validateLibrary judges v with the JSON Schema library alone.
func (s *Schema) validateLibrary(v any) []Violation {
	var r *jsonschema.EvaluationResult
	if m, ok := v.(map[string]any); ok {
		r = s.s.ValidateMap(m)
	} else {
		r = s.s.Validate(v)
	}
	if r.IsValid() {
		return nil
	}
	var out []Violation
	s.collect(r, "", "", v, &out)
	if len(out) == 0 {
		// The tree said invalid but named nothing we could place: never
		// accept, report the whole instance.
		out = append(out, Violation{Kind: KindSchema, Path: "", Rule: "schema", Message: "instance does not match the schema"})
	}
	return out
}

// applicators are keywords whose error only summarises failures of their
// subschemas; the subschema results carry the real reasons.
var applicators = map[string]bool{
	"properties": true, "patternProperties": true, "additionalProperties": true,
	"items": true, "prefixItems": true, "allOf": true, "$ref": true, "$dynamicRef": true,
	"then": true, "else": true, "dependentSchemas": true, "unevaluatedProperties": true,
	"unevaluatedItems": true, "propertyNames": true, "contentSchema": true,
}

// opaque are detail subtrees whose own failures are not reasons: a failing
// `if` selects `else`; anyOf/oneOf/not/contains report themselves.
var opaque = map[string]bool{"if": true, "anyOf": true, "oneOf": true, "not": true, "contains": true}

// collect walks the library's result tree. The library's instance
// locations are relative to the parent result and unescaped, so the
// absolute, escaped pointer and the instance value are tracked here.
func (s *Schema) collect(r *jsonschema.EvaluationResult, parentKW, loc string, inst any, out *[]Violation) {
	if r.Valid {
		return
	}
	before := len(*out)
	summarised := false
	for kw, e := range r.Errors {
		switch {
		case applicators[kw]:
			summarised = true
		case kw == "schema" && e.Code == "false_schema_mismatch":
			rule := parentKW
			if rule == "" {
				rule = "false"
			}
			msg := "value is not allowed here"
			if rule == "additionalProperties" {
				msg = fmt.Sprintf("additional property %q is not allowed", lastToken(loc))
			}
			*out = append(*out, Violation{Kind: KindSchema, Path: loc, Rule: rule, Message: msg})
		case kw == "required":
			for _, name := range missingRequired(e, inst) {
				*out = append(*out, Violation{Kind: KindSchema, Path: loc, Rule: "required",
					Message: fmt.Sprintf("required property %q is missing", name)})
			}
		case kw == "format" && strings.HasPrefix(fmt.Sprint(e.Params["format"]), sentinelPrefix):
			// A dialect check (dialect.go), reported under the keyword the
			// user wrote.
			rule, msg := "type", msgDraft4Integer
			if e.Params["format"] == fmtEmptyEnum {
				rule, msg = "enum", msgEmptyEnum
			}
			*out = append(*out, Violation{Kind: KindSchema, Path: loc, Rule: rule, Message: msg})
		case kw == "minContains" && !s.hasKeyword(r.SchemaLocation, "minContains"):
			// The library reports a plain `contains` failure as minContains
			// (its default of 1); name the keyword the user wrote.
			*out = append(*out, Violation{Kind: KindSchema, Path: loc, Rule: "contains", Message: "no item matches the contains schema"})
		default:
			*out = append(*out, Violation{Kind: KindSchema, Path: loc, Rule: s.userKeyword(r.SchemaLocation, kw), Message: s.safeMessage(e)})
		}
	}
	for _, d := range r.Details {
		seg := firstSegment(d.EvaluationPath)
		if opaque[seg] {
			continue
		}
		dloc, dinst := loc, inst
		// dependentSchemas applies to the object itself, though the
		// library locates its result at the trigger member.
		if rel := d.InstanceLocation; rel != "" && rel != "/" && seg != "dependentSchemas" {
			tok := rel[1:] // one member or index below this result
			child, ok := member(inst, tok)
			if !ok {
				// The library evaluates absent required members as null;
				// the missing member is already a required violation.
				continue
			}
			dloc, dinst = loc+"/"+EscapePointerToken(tok), child
		}
		s.collect(d, s.userKeyword(r.SchemaLocation, seg), dloc, dinst, out)
	}
	if summarised && len(*out) == before {
		// An applicator failed but no child said why (library shape we did
		// not anticipate): report the applicator rather than nothing.
		kws := make([]string, 0, len(r.Errors))
		for kw := range r.Errors {
			if applicators[kw] {
				kws = append(kws, kw)
			}
		}
		slices.Sort(kws)
		for _, kw := range kws {
			*out = append(*out, Violation{Kind: KindSchema, Path: loc, Rule: kw, Message: r.Errors[kw].Error()})
		}
	}
}

// member returns the object member or array element tok names.
func member(v any, tok string) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		c, ok := t[tok]
		return c, ok
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(t) {
			return nil, false
		}
		return t[i], true
	}
	return nil, false
}

// safeMessage renders a library error without the instance's own values:
// violations reach the 422 review, which must never carry output text.
func (s *Schema) safeMessage(e *jsonschema.EvaluationError) string {
	if e.Code == "value_not_in_enum" {
		allowed := fmt.Sprint(e.Params["expected"])
		if len(allowed) > 200 {
			// Cut at a character: a cut inside one left invalid UTF-8 in
			// the 422, which JSON readers turn into U+FFFD.
			allowed = strings.ToValidUTF8(allowed[:200], "") + "…"
		}
		return "value is not one of the allowed values: " + allowed
	}
	params := make(map[string]any, len(e.Params))
	for k, v := range e.Params {
		if p, ok := v.(string); ok && k == "pattern" && s.patterns[p] != "" {
			v = s.patterns[p] // the pattern as the user wrote it
		}
		params[k] = v
	}
	msg := e.Message
	if _, ok := params["value"]; ok {
		msg = strings.ReplaceAll(msg, "{value}", "value")
		delete(params, "value")
	}
	return (&jsonschema.EvaluationError{Message: msg, Params: params}).Error()
}

// hasKeyword reports whether the schema at a result's schemaLocation
// ("#/json/pointer") has kw. Unresolvable locations count as absent.
func (s *Schema) hasKeyword(schemaLoc, kw string) bool {
	_, has := s.schemaAt(schemaLoc)[kw]
	return has
}

// schemaAt is the (rewritten) schema object at a result's schemaLocation,
// nil when it cannot be found.
func (s *Schema) schemaAt(schemaLoc string) map[string]any {
	var v any = s.norm
	ptr := strings.TrimPrefix(schemaLoc, "#")
	if ptr != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			c, ok := member(v, UnescapePointerToken(tok))
			if !ok {
				return nil
			}
			v = c
		}
	}
	m, _ := v.(map[string]any)
	return m
}

// userKeyword names a keyword the library reports as the user wrote it:
// the library reads older spellings as their 2020-12 successors
// ("dependencies" as dependentRequired/dependentSchemas, array "items" as
// prefixItems and "additionalItems" as items).
func (s *Schema) userKeyword(schemaLoc, kw string) string {
	switch kw {
	case "dependentRequired", "dependentSchemas", "items", "prefixItems":
	default:
		return kw
	}
	m := s.schemaAt(schemaLoc)
	if m == nil {
		return kw
	}
	if _, has := m[kw]; has && kw != "items" {
		return kw
	}
	_, tuple := m["items"].([]any)
	switch {
	case kw == "prefixItems" && tuple:
		return "items"
	case kw == "items" && tuple:
		return "additionalItems"
	case kw == "dependentRequired" || kw == "dependentSchemas":
		if _, has := m["dependencies"]; has {
			return "dependencies"
		}
	}
	return kw
}

func firstSegment(p string) string {
	p = strings.TrimPrefix(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

func lastToken(ptr string) string {
	i := strings.LastIndexByte(ptr, '/')
	return UnescapePointerToken(ptr[i+1:])
}

// missingRequired names the members a required error is about. The library
// folds several into one quoted list; the instance settles which are absent.
func missingRequired(e *jsonschema.EvaluationError, obj any) []string {
	var names []string
	if p, ok := e.Params["property"]; ok {
		names = append(names, unquote(fmt.Sprint(p)))
	} else if p, ok := e.Params["properties"]; ok {
		s := fmt.Sprint(p)
		for _, n := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(s, "'"), "'"), "', '") {
			names = append(names, n)
		}
	}
	m, _ := obj.(map[string]any)
	out := names[:0]
	for _, n := range names {
		if _, present := m[n]; !present {
			out = append(out, n)
		}
	}
	if len(out) == 0 && len(names) > 0 {
		return names
	}
	slices.Sort(out)
	return out
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return s[1 : len(s)-1]
	}
	return s
}
