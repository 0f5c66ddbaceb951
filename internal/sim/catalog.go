package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
)

// Contract is what the simulator knows about one output contract: its
// schema, and, when it came from a contractd config, the policies.
type Contract struct {
	Name   string // config name; "" for a schema found only in a request
	Schema []byte // compact JSON
	doc    *schemaDoc
	hints  *Hints
	// compiled is the config's contract (schema and policies); nil for a
	// schema found only in a request.
	compiled *contracts.Contract
	// schema validates when compiled is nil; nil when it does not compile.
	schema     *contracts.Schema
	extractors []*sourceExtractor
}

// Catalog maps schemas to contracts: those of a contractd config, plus
// schemas met in requests (compiled once, cached).
type Catalog struct {
	known  []*Contract // longest schema first: containment checks try specific ones first
	byJSON map[string]*Contract

	mu    sync.Mutex
	adhoc map[string]*Contract

	files []string // the config and schema files a LoadCatalog read
}

// Files are the files LoadCatalog read it from (the config and every
// schema_file, absolute), to watch for a reload; nil for NewCatalog's.
func (c *Catalog) Files() []string { return c.files }

// maxAdhoc bounds the cache of schemas found only in requests.
const maxAdhoc = 256

// NewCatalog returns an empty catalog (schemas come from requests only).
func NewCatalog() *Catalog {
	return &Catalog{byJSON: map[string]*Contract{}, adhoc: map[string]*Contract{}}
}

// LoadCatalog reads a contractd config: every contract's schema, canonical
// label sets and policies, and the routes' user templates (to find an
// evidence source such as /body inside the rendered user message).
func LoadCatalog(path string) (*Catalog, error) {
	rt, err := config.LoadOffline(path) // it never serves: the server's secret variables may be unset
	if err != nil {
		return nil, err
	}
	parsed, err := config.Parse(path)
	if err != nil {
		return nil, err
	}
	c, err := catalogFrom(rt, parsed.File)
	if err != nil {
		return nil, err
	}
	c.files = rt.Files
	return c, nil
}

func catalogFrom(rt *config.Runtime, f *config.File) (*Catalog, error) {
	c := NewCatalog()
	for _, def := range f.Contracts {
		k, ok := rt.Contracts[def.Name]
		if !ok {
			continue
		}
		ct, err := newContract(def.Name, k.Schema.JSON())
		if err != nil {
			return nil, fmt.Errorf("contract %s: %w", def.Name, err)
		}
		ct.compiled = k
		ct.schema = k.Schema
		h := &Hints{PromptLeak: def.Policies.PromptLeak}
		for _, l := range def.Policies.Labels {
			h.Labels = append(h.Labels, LabelHint{Path: parsePathPat(l.Path), Set: l.Set, Values: rt.Labels[l.Set]})
		}
		for _, e := range def.Policies.Evidence {
			h.Evidence = append(h.Evidence, EvidenceHint{Path: parsePathPat(e.Path), Source: e.Source})
		}
		for _, q := range def.Policies.Questions {
			qh := QuestionHint{Path: parsePathPat(q.Path)}
			if q.Exactly != nil {
				qh.N, qh.Exactly = *q.Exactly, true
			} else if q.Max != nil {
				qh.N = *q.Max
			}
			h.Questions = append(h.Questions, qh)
		}
		for _, fb := range def.Policies.Forbidden {
			if re, err := regexp.Compile(fb.Pattern); err == nil {
				h.Forbidden = append(h.Forbidden, ForbiddenHint{Path: parsePathPat(fb.Path), RE: re})
			}
		}
		ct.hints = h
		for _, r := range rt.RouteList {
			if r.Passthrough || r.Contract != k || r.Prompt == nil || !r.Prompt.HasUser() {
				continue
			}
			for _, e := range h.Evidence {
				if e.Source == "" {
					continue
				}
				if x := newSourceExtractor(r.Prompt, e.Source); x != nil {
					ct.extractors = append(ct.extractors, x)
				}
			}
		}
		c.known = append(c.known, ct)
		c.byJSON[string(ct.Schema)] = ct
	}
	slices.SortStableFunc(c.known, func(a, b *Contract) int { return len(b.Schema) - len(a.Schema) })
	return c, nil
}

func newContract(name string, schemaJSON []byte) (*Contract, error) {
	v, err := decodeOrdered(schemaJSON)
	if err != nil {
		return nil, err
	}
	root, ok := v.(map[string]any)
	if !ok {
		root = map[string]any{}
	}
	return &Contract{Name: name, Schema: schemaJSON, doc: &schemaDoc{root: root}}, nil
}

// Contracts lists the names of the config's contracts.
func (c *Catalog) Contracts() []string {
	var out []string
	for _, k := range c.known {
		out = append(out, k.Name)
	}
	slices.Sort(out)
	return out
}

// Named returns a config contract by name.
func (c *Catalog) Named(name string) *Contract {
	for _, k := range c.known {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// lookup finds the contract for a schema found in a request (compact JSON).
func (c *Catalog) lookup(schema []byte) *Contract {
	if k, ok := c.byJSON[string(schema)]; ok {
		return k
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.adhoc[string(schema)]; ok {
		return k
	}
	k, err := newContract("", schema)
	if err != nil {
		return nil
	}
	if s, err := contracts.CompileSchema(schema); err == nil {
		k.schema = s
	}
	if len(c.adhoc) >= maxAdhoc {
		clear(c.adhoc)
	}
	c.adhoc[string(schema)] = k
	return k
}

// Find decides which contract a request is for: the response_format's
// json_schema when present, else a config contract whose compact schema
// the system prompt contains, else the largest balanced JSON object in the
// system prompt that looks like a schema. nil: no contract (plain chat).
func (c *Catalog) Find(responseSchema json.RawMessage, system string) *Contract {
	if len(bytes.TrimSpace(responseSchema)) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, responseSchema) == nil && bytes.HasPrefix(b.Bytes(), []byte("{")) {
			return c.lookup(b.Bytes())
		}
	}
	if system == "" {
		return nil
	}
	for _, k := range c.known {
		if strings.Contains(system, string(k.Schema)) {
			return k
		}
	}
	if s := findSchema(system); s != nil {
		return c.lookup(s)
	}
	return nil
}

// schemaWords are keywords that make a JSON object look like a schema.
var schemaWords = []string{"$schema", "type", "properties", "$defs", "allOf", "anyOf", "oneOf", "enum", "items", "$ref", "required"}

// findSchema returns the largest balanced JSON object in text (string-aware
// scan) that parses and looks like a JSON Schema, compacted.
func findSchema(text string) []byte {
	var best []byte
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		end := balancedEnd(text, i)
		if end < 0 {
			continue
		}
		cand := text[i : end+1]
		var m map[string]any
		if json.Unmarshal([]byte(cand), &m) != nil {
			continue
		}
		look := false
		for _, w := range schemaWords {
			if _, ok := m[w]; ok {
				look = true
				break
			}
		}
		if !look {
			continue
		}
		var b bytes.Buffer
		if json.Compact(&b, []byte(cand)) != nil {
			continue
		}
		if len(b.Bytes()) > len(best) {
			best = bytes.Clone(b.Bytes())
		}
		i = end // nested objects are part of this one
	}
	return best
}

// balancedEnd returns the index of the '}' closing the '{' at start, with
// braces inside JSON strings ignored; -1 when unbalanced.
func balancedEnd(s string, start int) int {
	depth := 0
	inStr := false
	for i := start; i < len(s); i++ {
		ch := s[i]
		if inStr {
			switch ch {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch ch {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				if ch != '}' {
					return -1
				}
				return i
			}
			if depth < 0 {
				return -1
			}
		}
	}
	return -1
}

// sourceExtractor recovers one input field from a user message rendered
// by a route's user template: the template is rendered once with a marker
// in every scalar of the prompt's example input, and the markers become
// capture groups of an anchored regexp.
type sourceExtractor struct {
	pointer string
	re      *regexp.Regexp
	group   int
}

const (
	markOpen  = "\uE000"
	markClose = "\uE001"
)

var markerRE = regexp.MustCompile(markOpen + `([0-9]+)` + markClose)

func newSourceExtractor(p *contracts.BoundPrompt, ptr string) *sourceExtractor {
	if p.ExampleInput == nil {
		return nil
	}
	for _, all := range []bool{true, false} {
		var ptrs []string
		in := markInput(p.ExampleInput, "", all, &ptrs)
		out, ok, err := p.RenderUser(contracts.TemplateData{Input: in})
		if err != nil || !ok {
			continue
		}
		var pat strings.Builder
		pat.WriteString(`(?s)\A`)
		group, n, last := 0, 0, 0
		for _, m := range markerRE.FindAllStringSubmatchIndex(out, -1) {
			pat.WriteString(regexp.QuoteMeta(out[last:m[0]]))
			pat.WriteString(`(.*?)`)
			n++
			idx, _ := strconv.Atoi(out[m[2]:m[3]])
			if group == 0 && idx < len(ptrs) && ptrs[idx] == ptr {
				group = n
			}
			last = m[1]
		}
		pat.WriteString(regexp.QuoteMeta(out[last:]))
		pat.WriteString(`\z`)
		if group == 0 {
			continue
		}
		re, err := regexp.Compile(pat.String())
		if err != nil {
			continue
		}
		return &sourceExtractor{pointer: ptr, re: re, group: group}
	}
	return nil
}

// markInput copies v with scalars replaced by markers (strings only, or
// every scalar when all is set); ptrs receives each marker's pointer.
func markInput(v any, at string, all bool, ptrs *[]string) any {
	mark := func() string {
		*ptrs = append(*ptrs, at)
		return markOpen + strconv.Itoa(len(*ptrs)-1) + markClose
	}
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			m[k] = markInput(t[k], at+"/"+contracts.EscapePointerToken(k), all, ptrs)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = markInput(e, at+"/"+strconv.Itoa(i), all, ptrs)
		}
		return a
	case string:
		return mark()
	case nil, bool:
		return v
	default:
		if all {
			return mark()
		}
		return v
	}
}

func (x *sourceExtractor) extract(msg string) (string, bool) {
	m := x.re.FindStringSubmatch(msg)
	if m == nil {
		return "", false
	}
	return m[x.group], true
}

// sources finds each evidence source of the contract in the request's
// last user message: through a route's user template, else (no template)
// in the message parsed as the JSON input object, else the whole message.
func (k *Contract) sources(lastUser string) map[string]string {
	out := map[string]string{"": lastUser}
	if k.hints == nil {
		return out
	}
	var obj any
	parsed := false
	for _, e := range k.hints.Evidence {
		if e.Source == "" {
			continue
		}
		if _, done := out[e.Source]; done {
			continue
		}
		found := false
		for _, x := range k.extractors {
			if x.pointer != e.Source {
				continue
			}
			if s, ok := x.extract(lastUser); ok {
				out[e.Source], found = s, true
				break
			}
		}
		if found {
			continue
		}
		if !parsed {
			parsed = true
			_ = json.Unmarshal([]byte(lastUser), &obj)
		}
		if s, ok := lookupString(obj, e.Source); ok {
			out[e.Source] = s
			continue
		}
		out[e.Source] = lastUser
	}
	return out
}

func lookupString(v any, ptr string) (string, bool) {
	for _, tok := range parsePathPat(ptr) {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		v = m[tok]
	}
	s, ok := v.(string)
	return s, ok
}

// subject is the contracts.Subject the simulator checks its own output
// with: the sources it found, placed at their input pointers.
func subject(system, lastUser string, sources map[string]string) *contracts.Subject {
	var in map[string]any
	for ptr, text := range sources {
		if ptr == "" {
			continue
		}
		if in == nil {
			in = map[string]any{}
		}
		toks := parsePathPat(ptr)
		m := in
		for i, tok := range toks {
			if i == len(toks)-1 {
				m[tok] = text
				break
			}
			next, ok := m[tok].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[tok] = next
			}
			m = next
		}
	}
	s := &contracts.Subject{LastUser: lastUser, HasLastUser: true, SystemPrompt: system}
	if in != nil {
		s.Input = in
	}
	return s
}

// check judges content the way contractd would, as far as the simulator
// knows the contract: every violation rule, sorted.
func (k *Contract) check(content string, subj *contracts.Subject) []contracts.Violation {
	if k.compiled != nil {
		return k.compiled.Check(content, subj).Violations
	}
	var v any
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		return []contracts.Violation{{Kind: contracts.KindParse, Rule: contracts.RuleNotJSON}}
	}
	if k.schema == nil {
		return nil
	}
	return k.schema.Validate(v)
}
