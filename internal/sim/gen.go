package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/contractd/contractd/contracts"
)

// pathPat is a policy path split into tokens; "*" matches any token.
type pathPat []string

func parsePathPat(p string) pathPat {
	if p == "" {
		return pathPat{}
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		parts[i] = contracts.UnescapePointerToken(s)
	}
	return parts
}

func (p pathPat) match(tokens []string) bool {
	if len(p) != len(tokens) {
		return false
	}
	for i, t := range p {
		if t != "*" && t != tokens[i] {
			return false
		}
	}
	return true
}

// Hints are what the contract's policies demand beyond the schema.
type Hints struct {
	Labels    []LabelHint
	Evidence  []EvidenceHint
	Questions []QuestionHint
	Forbidden []ForbiddenHint
	// PromptLeak: the contract rejects outputs quoting the system prompt.
	PromptLeak bool
}

// LabelHint: values at Path come from a canonical label set.
type LabelHint struct {
	Path   pathPat
	Set    string
	Values []string
}

// EvidenceHint: values at Path are exact substrings of Source ("" = last
// user message, else a pointer into the input object).
type EvidenceHint struct {
	Path   pathPat
	Source string
}

// QuestionHint bounds the question marks of each string at Path.
type QuestionHint struct {
	Path    pathPat
	N       int
	Exactly bool
}

// ForbiddenHint: strings at Path must not match RE.
type ForbiddenHint struct {
	Path pathPat
	RE   *regexp.Regexp
}

func (h *Hints) label(path []string) *LabelHint {
	if h == nil {
		return nil
	}
	return hintAt(h.Labels, path, func(l *LabelHint) pathPat { return l.Path })
}

func (h *Hints) evidence(path []string) *EvidenceHint {
	if h == nil {
		return nil
	}
	return hintAt(h.Evidence, path, func(e *EvidenceHint) pathPat { return e.Path })
}

func (h *Hints) question(path []string) *QuestionHint {
	if h == nil {
		return nil
	}
	return hintAt(h.Questions, path, func(q *QuestionHint) pathPat { return q.Path })
}

// hintAt returns the first of hints whose path matches path, or nil.
func hintAt[H any](hints []H, path []string, pathOf func(*H) pathPat) *H {
	for i := range hints {
		if pathOf(&hints[i]).match(path) {
			return &hints[i]
		}
	}
	return nil
}

func (h *Hints) forbidden(path []string, s string) bool {
	if h == nil {
		return false
	}
	for _, f := range h.Forbidden {
		if f.Path.match(path) && f.RE.MatchString(s) {
			return true
		}
	}
	return false
}

// siteKind is where a generated value came from, so a failure mode can
// break exactly that kind of value.
type siteKind string

const (
	siteLabel    siteKind = "label"
	siteEnum     siteKind = "enum"
	siteEvidence siteKind = "evidence"
	siteQuestion siteKind = "question" // a string under a question policy
)

type site struct {
	kind    siteKind
	path    []string
	allowed []string // label / enum values
	source  string   // evidence source
	q       *QuestionHint
}

// generator builds one instance of a schema. It is not safe for
// concurrent use; one per request.
type generator struct {
	rng   *rand.Rand
	doc   *schemaDoc
	hints *Hints
	text  *textCtx
	sites []site
	// pOptional is the chance an optional property is present.
	pOptional float64
}

func (g *generator) generate() any {
	g.sites = nil
	return g.value(g.doc.root, nil, "", 0)
}

func child(path []string, tok string) []string {
	out := make([]string, len(path)+1)
	copy(out, path)
	out[len(path)] = tok
	return out
}

func hasPrefix(p, prefix []string) bool {
	return len(p) >= len(prefix) && slices.Equal(p[:len(prefix)], prefix)
}

// dropSites forgets the sites under path (before it is regenerated).
func (g *generator) dropSites(path []string) {
	g.sites = slices.DeleteFunc(g.sites, func(s site) bool { return hasPrefix(s.path, path) })
}

func (g *generator) value(s map[string]any, path []string, name string, depth int) any {
	fs, conds := g.doc.resolve(s)
	if c, ok := fs["const"]; ok {
		return fromSchemaValue(c)
	}
	ts := types(fs)
	if lh := g.hints.label(path); lh != nil && slices.Contains(ts, "string") {
		var cands []string
		for _, v := range lh.Values {
			if g.doc.matches(fs, v) {
				cands = append(cands, v)
			}
		}
		if len(cands) > 0 {
			g.sites = append(g.sites, site{kind: siteLabel, path: path, allowed: lh.Values})
			return pick(g.rng, cands)
		}
	}
	if e, ok := fs["enum"].([]any); ok && len(e) > 0 {
		var cands []any
		for _, v := range e {
			if !slices.ContainsFunc(nots(fs), func(n map[string]any) bool { return g.doc.matches(n, v) }) {
				cands = append(cands, v)
			}
		}
		if len(cands) == 0 {
			cands = e
		}
		var allowed []string
		for _, v := range e {
			if str, ok := v.(string); ok {
				allowed = append(allowed, str)
			}
		}
		if len(allowed) == len(e) {
			g.sites = append(g.sites, site{kind: siteEnum, path: path, allowed: allowed})
		}
		return fromSchemaValue(pick(g.rng, cands))
	}
	t := ts[0]
	if depth > 12 {
		// A recursive schema that requires itself: stop with the
		// smallest value of the type rather than recurse forever.
		switch t {
		case "object":
			return newObj()
		case "array":
			return []any{}
		case "integer", "number":
			return int64(0)
		case "boolean":
			return false
		case "null":
			return nil
		}
		return ""
	}
	if len(ts) > 1 {
		var nonNull []string
		for _, x := range ts {
			if x != "null" {
				nonNull = append(nonNull, x)
			}
		}
		switch {
		case len(nonNull) == 0:
			t = "null"
		case len(nonNull) < len(ts) && depth > 0 && g.rng.Float64() < 0.1:
			t = "null"
		default:
			t = pick(g.rng, nonNull)
		}
	}
	switch t {
	case "object":
		return g.object(fs, conds, path, depth)
	case "array":
		return g.array(fs, path, name, depth)
	case "integer":
		return g.number(fs, name, true)
	case "number":
		return g.number(fs, name, false)
	case "boolean":
		return g.rng.IntN(2) == 0
	case "null":
		return nil
	}
	return g.str(fs, path, name)
}

func (g *generator) object(fs map[string]any, conds []cond, path []string, depth int) any {
	o := newObj()
	props, _ := fs["properties"].(map[string]any)
	required := map[string]bool{}
	for _, r := range asList(fs["required"]) {
		if name, ok := r.(string); ok {
			required[name] = true
		}
	}
	for _, k := range keys(props) {
		ps, _ := props[k].(map[string]any)
		if required[k] || (depth < 5 && g.rng.Float64() < g.pOptional) {
			o.Set(k, g.value(ps, child(path, k), k, depth+1))
		}
	}
	for _, r := range asList(fs["required"]) {
		if name, ok := r.(string); ok && !o.Has(name) {
			o.Set(name, g.text.phrase(g.rng))
		}
	}
	g.primary(props, o, path)
	overlays := map[string][]map[string]any{}
	for pass := 0; pass < 6 && len(conds) > 0; pass++ {
		changed := false
		for _, c := range conds {
			if g.applyCond(c, fs, o, path, depth, overlays) {
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	return o
}

// primary makes a "primary_X" member agree with the first label of a
// sibling "Xs" list (primary_intent and intents[0].label), as a model that
// reads its own output would.
func (g *generator) primary(props map[string]any, o *Obj, path []string) {
	for _, k := range o.Keys {
		base, ok := strings.CutPrefix(k, "primary_")
		if _, isStr := o.M[k].(string); !ok || !isStr {
			continue
		}
		list, _ := o.M[base+"s"].([]any)
		if len(list) == 0 {
			continue
		}
		first, _ := list[0].(*Obj)
		if first == nil {
			continue
		}
		label, ok := first.M["label"].(string)
		if !ok {
			continue
		}
		ps, _ := props[k].(map[string]any)
		if !g.doc.matches(ps, label) {
			continue
		}
		if lh := g.hints.label(child(path, k)); lh != nil && !slices.Contains(lh.Values, label) {
			continue
		}
		o.M[k] = label
	}
}

func (g *generator) applyCond(c cond, base map[string]any, o *Obj, path []string, depth int, overlays map[string][]map[string]any) bool {
	br := c.elseS
	if g.doc.matches(c.ifS, o) {
		br = c.thenS
	}
	if br == nil {
		return false
	}
	return g.applyBranch(br, base, o, path, depth, overlays)
}

func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// applyBranch makes o satisfy a then/else branch: missing required members
// are generated, members the branch constrains and o's value does not
// satisfy are regenerated (base schema merged with every overlay seen for
// that member), and members a "not required" forbids are removed.
func (g *generator) applyBranch(br, base map[string]any, o *Obj, path []string, depth int, overlays map[string][]map[string]any) bool {
	fb, sub := g.doc.resolve(br)
	changed := false
	bprops, _ := fb["properties"].(map[string]any)
	for _, k := range keys(bprops) {
		ov, _ := bprops[k].(map[string]any)
		if ov != nil && !slices.ContainsFunc(overlays[k], func(m map[string]any) bool { return sameMap(m, ov) }) {
			overlays[k] = append(overlays[k], ov)
		}
	}
	propSchema := func(k string) map[string]any {
		props, _ := base["properties"].(map[string]any)
		s, _ := props[k].(map[string]any)
		if s == nil {
			s = map[string]any{}
		}
		for _, ov := range overlays[k] {
			s = mergeRefs(s, ov)
		}
		return s
	}
	for _, r := range asList(fb["required"]) {
		if k, ok := r.(string); ok && !o.Has(k) {
			o.Set(k, g.value(propSchema(k), child(path, k), k, depth+1))
			changed = true
		}
	}
	for _, k := range keys(bprops) {
		ov, _ := bprops[k].(map[string]any)
		if !o.Has(k) || g.doc.matches(ov, o.M[k]) {
			continue
		}
		p := child(path, k)
		g.dropSites(p)
		o.Set(k, g.value(propSchema(k), p, k, depth+1))
		changed = true
	}
	baseReq := map[string]bool{}
	for _, r := range append(asList(base["required"]), asList(fb["required"])...) {
		if k, ok := r.(string); ok {
			baseReq[k] = true
		}
	}
	for _, n := range nots(fb) {
		if !g.doc.matches(n, o) {
			continue
		}
		for _, r := range asList(n["required"]) {
			if k, ok := r.(string); ok && o.Has(k) && !baseReq[k] {
				g.dropSites(child(path, k))
				o.Delete(k)
				changed = true
			}
		}
	}
	for _, c := range sub {
		if g.applyCond(c, base, o, path, depth, overlays) {
			changed = true
		}
	}
	return changed
}

func (g *generator) array(fs map[string]any, path []string, name string, depth int) any {
	minI := intKw(fs, "minItems", 0)
	maxI := intKw(fs, "maxItems", -1)
	if maxI < 0 {
		maxI = minI + 4
	}
	hi := min(maxI, minI+3)
	n := minI
	if hi > minI && depth < 6 {
		n += g.rng.IntN(hi - minI + 1)
		if n == 0 && g.rng.Float64() < 0.6 {
			n = 1
		}
	}
	items, _ := fs["items"].(map[string]any)
	if items == nil {
		items = map[string]any{}
	}
	unique, _ := fs["uniqueItems"].(bool)
	out := []any{}
	if cm, ok := fs["contains"].(map[string]any); ok && maxI > 0 {
		out = append(out, g.value(mergeRefs(items, cm), child(path, "0"), name, depth+1))
		n = max(n, 1)
	}
	for tries := 0; len(out) < n && tries < n*8+8; tries++ {
		p := child(path, fmt.Sprint(len(out)))
		v := g.value(items, p, name, depth+1)
		if unique && slices.ContainsFunc(out, func(x any) bool { return equalJSON(x, v) }) {
			g.dropSites(p)
			continue
		}
		out = append(out, v)
	}
	return out
}

func (g *generator) number(fs map[string]any, name string, integer bool) any {
	lo, hasLo := num(fs["minimum"])
	hi, hasHi := num(fs["maximum"])
	if x, ok := num(fs["exclusiveMinimum"]); ok {
		lo, hasLo = x+0.01, true
		if integer {
			lo = math.Floor(x) + 1
		}
	}
	if x, ok := num(fs["exclusiveMaximum"]); ok {
		hi, hasHi = x-0.01, true
		if integer {
			hi = math.Ceil(x) - 1
		}
	}
	switch {
	case !hasLo && !hasHi:
		lo, hi = 0, 20
	case !hasLo:
		lo = hi - 20
	case !hasHi:
		hi = lo + 20
	}
	if integer {
		l, h := math.Ceil(lo), math.Floor(hi)
		if h < l {
			return int64(l)
		}
		span := min(h-l, 9)
		v := l + float64(g.rng.IntN(int(span)+1))
		if m, ok := num(fs["multipleOf"]); ok && m > 0 {
			v = math.Ceil(l/m) * m
		}
		return int64(v)
	}
	lname := strings.ToLower(name)
	var v float64
	if strings.Contains(lname, "confidence") || strings.Contains(lname, "score") || (lo >= 0 && hi <= 1) {
		a, b := math.Max(lo, 0.55), math.Min(hi, 0.99)
		if b < a {
			a, b = lo, hi
		}
		v = a + g.rng.Float64()*(b-a)
	} else {
		v = lo + g.rng.Float64()*(math.Min(hi, lo+100)-lo)
	}
	v = math.Round(v*100) / 100
	if m, ok := num(fs["multipleOf"]); ok && m > 0 {
		v = math.Ceil(lo/m) * m
	}
	return math.Min(math.Max(v, lo), hi)
}

func (g *generator) str(fs map[string]any, path []string, name string) any {
	minR := intKw(fs, "minLength", 0)
	maxR := intKw(fs, "maxLength", -1)
	pattern, _ := fs["pattern"].(string)
	var re *regexp.Regexp
	if pattern != "" {
		re = compilePattern(pattern)
	}
	ok := func(s string) bool {
		n := utf8.RuneCountInString(s)
		if n < minR || (maxR >= 0 && n > maxR) {
			return false
		}
		if re != nil && !re.MatchString(s) {
			return false
		}
		return !g.hints.forbidden(path, s) && g.doc.matches(fs, s)
	}
	if eh := g.hints.evidence(path); eh != nil {
		src := g.text.sources[eh.Source]
		for i := 0; i < 8; i++ {
			s, found := snippet(g.rng, src, maxR)
			if found && ok(s) {
				g.sites = append(g.sites, site{kind: siteEvidence, path: path, source: eh.Source})
				return s
			}
		}
	}
	if qh := g.hints.question(path); qh != nil {
		for i := 0; i < 8; i++ {
			var s string
			switch {
			case qh.N == 0:
				s = strings.ReplaceAll(g.named(name), "?", ".")
			case qh.Exactly:
				parts := make([]string, qh.N)
				for j := range parts {
					parts[j] = g.text.question(g.rng)
				}
				s = strings.Join(parts, " ")
			default:
				s = g.text.question(g.rng)
			}
			if ok(s) {
				g.sites = append(g.sites, site{kind: siteQuestion, path: path, q: qh})
				return s
			}
		}
	}
	if f, _ := fs["format"].(string); f != "" {
		if s, known := g.format(f); known {
			return s
		}
	}
	var last string
	for i := 0; i < 6; i++ {
		s := g.text.fitLength(g.rng, g.named(name), minR, maxR)
		if ok(s) {
			return s
		}
		last = s
	}
	if re != nil {
		// Models copy examples from their prompt: a token of the system
		// prompt that fits the pattern (snake_case ones first).
		var fits, snakes []string
		for _, tok := range g.text.sysToks {
			if ok(tok) {
				fits = append(fits, tok)
				if strings.Contains(tok, "_") {
					snakes = append(snakes, tok)
				}
			}
		}
		if len(snakes) > 0 {
			return pick(g.rng, snakes)
		}
		if s := snakeCase(last); ok(s) {
			return s
		}
		if len(fits) > 0 {
			return pick(g.rng, fits)
		}
		for i := 0; i < 20; i++ {
			if s, parsed := genFromPattern(g.rng, pattern); parsed && ok(s) {
				return s
			}
		}
	}
	return last
}

// named writes text for a property by its name.
func (g *generator) named(name string) string {
	n := strings.ToLower(name)
	t, rng := g.text, g.rng
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(n, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("question"):
		return t.question(rng)
	case has("refusal"):
		return t.refusal(rng)
	case has("next_step", "nextstep"):
		return t.nextStep(rng)
	case has("closure", "closing", "goodbye"):
		return t.closing(rng)
	case has("email"):
		return snakeCase(t.topic(rng)) + "@example.com"
	case has("phone"):
		return fmt.Sprintf("+49 30 %04d %04d", rng.IntN(10000), rng.IntN(10000))
	case has("url", "uri", "link", "href"):
		return "https://example.com/" + snakeCase(t.topic(rng))
	case has("markdown"):
		return t.markdown(rng)
	case n == "path" || has("file"):
		return t.filePath(rng)
	case has("title", "heading"):
		return t.title(rng)
	case has("version"):
		return fmt.Sprintf("1.%d.0", rng.IntN(5))
	case has("redacted", "masked"):
		return redact(t.identifier(rng))
	case has("key_value", "value", "number", "identifier") || n == "id" || strings.HasSuffix(n, "_id") || strings.HasSuffix(n, "_ids"):
		return t.identifier(rng)
	case has("text", "answer", "description", "detail", "summary", "explanation", "message", "body", "issue", "dependency"):
		return t.paragraph(rng)
	case has("note", "reason", "intent", "requirement", "step", "finding", "assumption", "unknown", "scope", "comment", "statement"):
		return t.sentence(rng)
	case has("term", "section", "content", "action", "label", "option", "tag", "name", "category", "type", "kind"):
		return t.phrase(rng)
	}
	return t.phrase(rng)
}

func (g *generator) format(f string) (string, bool) {
	r := g.rng
	switch f {
	case "date-time":
		return fmt.Sprintf("2025-%02d-%02dT%02d:%02d:%02dZ", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60)), true
	case "date":
		return fmt.Sprintf("2025-%02d-%02d", 1+r.IntN(12), 1+r.IntN(28)), true
	case "time":
		return fmt.Sprintf("%02d:%02d:%02dZ", r.IntN(24), r.IntN(60), r.IntN(60)), true
	case "email", "idn-email":
		return snakeCase(g.text.topic(r)) + "@example.com", true
	case "uri", "url", "iri", "uri-reference", "iri-reference":
		return "https://example.com/" + snakeCase(g.text.topic(r)), true
	case "uuid":
		return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), 0x8000|r.IntN(1<<14), r.Uint64()&(1<<48-1)), true
	case "hostname", "idn-hostname":
		return "api.example.com", true
	case "ipv4":
		return fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), 1+r.IntN(254)), true
	case "ipv6":
		return fmt.Sprintf("2001:db8::%x", 1+r.IntN(0xfffe)), true
	case "duration":
		return fmt.Sprintf("PT%dM", 1+r.IntN(59)), true
	case "json-pointer":
		return "/" + snakeCase(g.text.topic(r)), true
	case "relative-json-pointer":
		return "0", true
	case "regex":
		return "^[a-z]+$", true
	}
	return "", false
}
