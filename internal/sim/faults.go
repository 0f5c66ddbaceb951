package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mode is what the simulator does with one request.
type Mode string

// Modes. Every failure mode is one real models show; the comment names the
// violation contractd reports for a strict contract.
const (
	ModeAuto            Mode = "auto"             // seeded draw at the configured failure rate
	ModeValid           Mode = "valid"            // a valid instance
	ModeFence           Mode = "fence"            // ```json … ``` (markdown_fence)
	ModeProse           Mode = "prose"            // text before and after the object (prose_around_json)
	ModeTrailingComma   Mode = "trailing_comma"   // {"a":1,} (not_json)
	ModeExtraKey        Mode = "extra_key"        // a member the schema does not define (additionalProperties)
	ModeMissingRequired Mode = "missing_required" // a required member left out (required)
	ModeWrongLabel      Mode = "wrong_label"      // a non-canonical label (label), else a wrong enum value (enum)
	ModeBadEvidence     Mode = "bad_evidence"     // a snippet that is not in the input (evidence_not_found)
	ModeTwoQuestions    Mode = "two_questions"    // one question too many (questions)
	ModeTruncated       Mode = "truncated"        // cut off, finish_reason length (output_truncated)
	ModeRefusal         Mode = "refusal"          // message.refusal set, content null (model_refusal)
	ModeEmpty           Mode = "empty"            // content "" (empty_output)
	ModeDuplicateKey    Mode = "duplicate_key"    // a member given twice (duplicate_key)
	ModeHTTP429         Mode = "http_429"         // HTTP 429 rate limited (transport retry, then 502)
	ModeHTTP500         Mode = "http_500"         // HTTP 500 (transport retry, then 502)
)

// FailureModes are the modes a seeded draw picks from, in a fixed order.
var FailureModes = []Mode{ModeFence, ModeProse, ModeTrailingComma, ModeExtraKey, ModeMissingRequired,
	ModeWrongLabel, ModeBadEvidence, ModeTwoQuestions, ModeTruncated, ModeRefusal, ModeEmpty, ModeDuplicateKey}

// AllModes are every mode a request may force.
var AllModes = append([]Mode{ModeAuto, ModeValid}, append(slices.Clone(FailureModes), ModeHTTP429, ModeHTTP500)...)

// DefaultWeights are the relative frequencies of failure modes in auto mode.
var DefaultWeights = map[Mode]float64{
	ModeFence: 3, ModeProse: 3, ModeTrailingComma: 2, ModeExtraKey: 2, ModeMissingRequired: 1,
	ModeWrongLabel: 3, ModeBadEvidence: 3, ModeTwoQuestions: 2, ModeTruncated: 1, ModeRefusal: 1,
	ModeEmpty: 0, ModeDuplicateKey: 1,
}

// ParseMode accepts a mode name; "hot:MODE" means MODE when the request's
// temperature is above 0 and valid at temperature 0 (a failure the
// deterministic retry repairs).
func ParseMode(s string) (m Mode, hotOnly bool, err error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "hot:"); ok {
		s, hotOnly = rest, true
	}
	if s == "" {
		return ModeAuto, false, nil
	}
	s = strings.ReplaceAll(s, "-", "_")
	if !slices.Contains(AllModes, Mode(s)) {
		return "", false, fmt.Errorf("unknown sim_mode %q (one of %s, optionally prefixed hot:)", s, modeList())
	}
	return Mode(s), hotOnly, nil
}

func modeList() string {
	var names []string
	for _, m := range AllModes {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ")
}

// ParseWeights reads "fence=3,prose=1,…" over DefaultWeights.
func ParseWeights(s string) (map[Mode]float64, error) {
	w := map[Mode]float64{}
	for k, v := range DefaultWeights {
		w[k] = v
	}
	if strings.TrimSpace(s) == "" {
		return w, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("weights: %q is not MODE=WEIGHT", part)
		}
		m := Mode(strings.ReplaceAll(strings.TrimSpace(name), "-", "_"))
		if !slices.Contains(FailureModes, m) {
			return nil, fmt.Errorf("weights: %q is not a failure mode", name)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("weights: bad weight %q", val)
		}
		w[m] = f
	}
	return w, nil
}

// output is a reply before it is wrapped in a chat completion.
type output struct {
	content *string // nil: JSON null
	refusal string
	finish  string
	status  int // non-200: an HTTP error instead of a completion
}

func text(s string) *string { return &s }

// instance is a generated valid value with what the faults need.
type instance struct {
	value   any
	sites   []site
	hints   *Hints
	doc     *schemaDoc
	sources map[string]string
	text    *textCtx
}

// applicable reports whether mode can break this instance the intended way.
func (in *instance) applicable(m Mode) bool {
	root, _ := in.value.(*Obj)
	switch m {
	case ModeExtraKey:
		fs, _ := in.doc.resolve(in.doc.root)
		ap, ok := fs["additionalProperties"].(bool)
		up, uok := fs["unevaluatedProperties"].(bool)
		return root != nil && ((ok && !ap) || (uok && !up))
	case ModeMissingRequired:
		fs, _ := in.doc.resolve(in.doc.root)
		for _, r := range asList(fs["required"]) {
			if k, ok := r.(string); ok && root != nil && root.Has(k) {
				return true
			}
		}
		return false
	case ModeWrongLabel:
		// A contract with canonical labels fails on a label; others on an
		// enum value.
		if in.hints != nil && len(in.hints.Labels) > 0 {
			return in.siteOf(siteLabel)
		}
		return in.siteOf(siteEnum)
	case ModeBadEvidence:
		return in.siteOf(siteEvidence)
	case ModeTwoQuestions:
		return len(in.questionTargets()) > 0
	case ModeDuplicateKey:
		return root != nil && len(root.Keys) > 0
	}
	return true
}

func (in *instance) siteOf(kind siteKind) bool {
	return slices.ContainsFunc(in.sites, func(s site) bool { return s.kind == kind })
}

// sitesOf returns the sites of one kind.
func (in *instance) sitesOf(kind siteKind) []site {
	var out []site
	for _, s := range in.sites {
		if s.kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// questionTargets are strings a question-count policy watches (or, without
// policies, members named like a question), and arrays under such a policy
// whose items could carry one.
type qTarget struct {
	path   []string
	q      *QuestionHint
	append bool // path is an array: add an item
}

func (in *instance) questionTargets() []qTarget {
	var out []qTarget
	for _, s := range in.sites {
		if s.kind == siteQuestion {
			out = append(out, qTarget{path: s.path, q: s.q})
		}
	}
	if len(out) > 0 {
		return out
	}
	if in.hints != nil {
		for i := range in.hints.Questions {
			q := &in.hints.Questions[i]
			if len(q.Path) == 0 || q.Path[len(q.Path)-1] != "*" {
				continue
			}
			walk(in.value, nil, func(p []string, v any) {
				if _, ok := v.([]any); ok && pathPat(q.Path[:len(q.Path)-1]).match(p) {
					out = append(out, qTarget{path: p, q: q, append: true})
				}
			})
		}
		if len(out) > 0 || len(in.hints.Questions) > 0 {
			return out
		}
	}
	walk(in.value, nil, func(p []string, v any) {
		if _, ok := v.(string); ok && len(p) > 0 && strings.Contains(strings.ToLower(p[len(p)-1]), "question") {
			out = append(out, qTarget{path: p, q: &QuestionHint{N: 1, Exactly: true}})
		}
	})
	return out
}

func walk(v any, path []string, fn func([]string, any)) {
	fn(path, v)
	switch t := v.(type) {
	case *Obj:
		for _, k := range t.Keys {
			walk(t.M[k], child(path, k), fn)
		}
	case []any:
		for i, e := range t {
			walk(e, child(path, strconv.Itoa(i)), fn)
		}
	}
}

func get(v any, path []string) any {
	for _, tok := range path {
		switch t := v.(type) {
		case *Obj:
			v = t.M[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

func set(v any, path []string, val any) {
	if len(path) == 0 {
		return
	}
	parent := get(v, path[:len(path)-1])
	last := path[len(path)-1]
	switch t := parent.(type) {
	case *Obj:
		t.Set(last, val)
	case []any:
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(t) {
			t[i] = val
		}
	}
}

// render writes a valid instance the way models do: compact or indented.
func render(rng *rand.Rand, v any) string {
	b := encodeJSON(v)
	if rng.Float64() < 0.4 {
		b = indentJSON(b)
	}
	return string(b)
}

var prosePrefixes = []string{
	"Sure! Here is the JSON object:\n\n",
	"Here is the result you asked for:\n",
	"Based on the input, this is my answer.\n\n",
}

var proseSuffixes = []string{
	"\n\nLet me know if you need anything else.",
	"\n\nI hope this helps!",
	"",
}

var extraKeys = []string{"reasoning", "explanation", "notes", "comment", "confidence_note", "sources"}

// apply breaks a valid instance with mode m. maxTokens is the request's
// output limit (0: none).
func (in *instance) apply(rng *rand.Rand, m Mode) output {
	switch m {
	case ModeFence:
		lang := "json"
		if rng.IntN(4) == 0 {
			lang = ""
		}
		return output{content: text("```" + lang + "\n" + string(indentJSON(encodeJSON(in.value))) + "\n```"), finish: "stop"}
	case ModeProse:
		return output{content: text(pick(rng, prosePrefixes) + render(rng, in.value) + pick(rng, proseSuffixes)), finish: "stop"}
	case ModeTrailingComma:
		s := string(indentJSON(encodeJSON(in.value)))
		i := strings.LastIndex(s, "\n}")
		if i < 0 {
			i = strings.LastIndexByte(s, '}')
		}
		if i > 0 {
			s = s[:i] + "," + s[i:]
		}
		return output{content: text(s), finish: "stop"}
	case ModeExtraKey:
		root := in.value.(*Obj)
		fs, _ := in.doc.resolve(in.doc.root)
		props, _ := fs["properties"].(map[string]any)
		for _, k := range extraKeys {
			if _, defined := props[k]; !defined && !root.Has(k) {
				root.Set(k, in.text.sentence(rng))
				break
			}
		}
		return output{content: text(render(rng, in.value)), finish: "stop"}
	case ModeMissingRequired:
		root := in.value.(*Obj)
		fs, _ := in.doc.resolve(in.doc.root)
		var present []string
		for _, r := range asList(fs["required"]) {
			if k, ok := r.(string); ok && root.Has(k) {
				present = append(present, k)
			}
		}
		root.Delete(pick(rng, present))
		return output{content: text(render(rng, in.value)), finish: "stop"}
	case ModeWrongLabel:
		cands := in.sitesOf(siteLabel)
		if len(cands) == 0 {
			cands = in.sitesOf(siteEnum)
		}
		s := pick(rng, cands)
		if cur, ok := get(in.value, s.path).(string); ok {
			set(in.value, s.path, nearMiss(rng, cur, s.allowed))
		}
		return output{content: text(render(rng, in.value)), finish: "stop"}
	case ModeBadEvidence:
		s := pick(rng, in.sitesOf(siteEvidence))
		if cur, ok := get(in.value, s.path).(string); ok {
			set(in.value, s.path, paraphrase(cur, in.sources[s.source], in.sources[""]))
		}
		return output{content: text(render(rng, in.value)), finish: "stop"}
	case ModeTwoQuestions:
		t := pick(rng, in.questionTargets())
		need := t.q.N + 1
		if t.append {
			arr, _ := get(in.value, t.path).([]any)
			var parts []string
			for range need {
				parts = append(parts, in.text.question(rng))
			}
			arr = append(arr, strings.Join(parts, " "))
			if len(t.path) == 0 {
				in.value = arr
			} else {
				set(in.value, t.path, arr)
			}
		} else if cur, ok := get(in.value, t.path).(string); ok {
			s := cur
			for countQ(s) < need {
				if countQ(s) == 0 && t.q.N == 0 {
					s += " Is there anything else I can help with?"
				} else {
					s += " " + in.text.question(rng)
				}
			}
			set(in.value, t.path, s)
		}
		return output{content: text(render(rng, in.value)), finish: "stop"}
	case ModeTruncated:
		s := render(rng, in.value)
		r := []rune(s)
		cut := len(r) * (35 + rng.IntN(46)) / 100
		if cut >= len(r) {
			cut = len(r) - 1
		}
		if cut < 1 {
			cut = 1
		}
		return output{content: text(string(r[:cut])), finish: "length"}
	case ModeRefusal:
		return output{refusal: pick(rng, []string{
			"I'm sorry, but I can't help with that request.",
			"I'm sorry, I can't assist with that.",
		}), finish: "stop"}
	case ModeEmpty:
		return output{content: text(""), finish: "stop"}
	case ModeDuplicateKey:
		root := in.value.(*Obj)
		k := pick(rng, root.Keys)
		s := string(encodeJSON(in.value))
		dup := "," + string(encodeJSON(k)) + ":" + string(encodeJSON(root.M[k]))
		s = s[:len(s)-1] + dup + "}"
		return output{content: text(s), finish: "stop"}
	case ModeHTTP429:
		return output{status: 429}
	case ModeHTTP500:
		return output{status: 500}
	}
	return output{content: text(render(rng, in.value)), finish: "stop"}
}

func countQ(s string) int { return strings.Count(s, "?") + strings.Count(s, "？") }

// nearMiss is a label as careless models write it: spaced and title-cased,
// hyphenated, other case, pluralised.
func nearMiss(rng *rand.Rand, v string, allowed []string) string {
	words := strings.FieldsFunc(v, func(r rune) bool { return r == '_' || r == '-' || r == ' ' })
	for i, w := range words {
		words[i] = capFirst(strings.ToLower(w))
	}
	cands := []string{
		strings.Join(words, " "),
		strings.ReplaceAll(v, "_", "-"),
		strings.ToLower(v),
		strings.ToUpper(v),
		v + "s",
		"other_" + v,
	}
	start := rng.IntN(len(cands))
	for i := range cands {
		c := cands[(start+i)%len(cands)]
		if c != v && c != "" && !slices.Contains(allowed, c) {
			return c
		}
	}
	return v + "_x"
}

// paraphrase rewrites a snippet so it is no longer a verbatim substring of
// the input (wrong case, reworded), the commonest evidence failure.
func paraphrase(s, source, lastUser string) string {
	notIn := func(c string) bool {
		return c != "" && !strings.Contains(source, c) && !strings.Contains(lastUser, c)
	}
	r, n := utf8.DecodeRuneInString(s)
	if unicode.IsLetter(r) {
		flip := unicode.ToUpper(r)
		if unicode.IsUpper(r) {
			flip = unicode.ToLower(r)
		}
		if c := string(flip) + s[n:]; notIn(c) {
			return c
		}
	}
	if ws := strings.Fields(s); len(ws) >= 2 {
		ws[0], ws[1] = ws[1], ws[0]
		if c := strings.Join(ws, " "); notIn(c) {
			return c
		}
	}
	if c := "the customer wrote that " + s; notIn(c) {
		return c
	}
	return s + " (paraphrased)"
}
