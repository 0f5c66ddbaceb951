package sim

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/contractd/contractd/contracts"
)

// schemaDoc is a decoded contract schema with its $ref targets.
type schemaDoc struct {
	root map[string]any
}

// ref resolves a local $ref ("#", "#/$defs/x", "#/definitions/x", any
// JSON Pointer into the document). Unresolvable refs give nil.
func (d *schemaDoc) ref(r string) map[string]any {
	if r == "#" || r == "" {
		return d.root
	}
	if !strings.HasPrefix(r, "#/") {
		return nil
	}
	var cur any = d.root
	for _, tok := range strings.Split(r[2:], "/") {
		tok = contracts.UnescapePointerToken(tok)
		switch t := cur.(type) {
		case map[string]any:
			cur = t[tok]
		case []any:
			i := 0
			for _, c := range tok {
				if c < '0' || c > '9' {
					return nil
				}
				i = i*10 + int(c-'0')
			}
			if i >= len(t) {
				return nil
			}
			cur = t[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

// cond is an if/then/else triple.
type cond struct {
	ifS, thenS, elseS map[string]any
}

// resolve flattens a schema for generation: $ref targets and the plain
// (non-conditional) members of allOf are merged in; the conditionals of the
// schema itself and of allOf are returned separately, in document order.
func (d *schemaDoc) resolve(s map[string]any) (map[string]any, []cond) {
	return d.resolveDepth(s, 0)
}

func (d *schemaDoc) resolveDepth(s map[string]any, depth int) (map[string]any, []cond) {
	if s == nil || depth > 16 {
		return map[string]any{}, nil
	}
	out := map[string]any{}
	var conds []cond
	if r, ok := s["$ref"].(string); ok {
		t, c := d.resolveDepth(d.ref(r), depth+1)
		out = merge(out, t)
		conds = append(conds, c...)
	}
	own := map[string]any{}
	for k, v := range s {
		switch k {
		case "$ref", "allOf", "if", "then", "else", "$defs", "definitions", "$comment", "$schema", "$id", "title", "description", "examples":
			continue
		}
		own[k] = v
	}
	if o, ok := s[orderKey]; ok {
		own[orderKey] = o
	}
	out = merge(out, own)
	if ifS, ok := s["if"].(map[string]any); ok {
		c := cond{ifS: ifS}
		c.thenS, _ = s["then"].(map[string]any)
		c.elseS, _ = s["else"].(map[string]any)
		conds = append(conds, c)
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, e := range all {
			em, ok := e.(map[string]any)
			if !ok {
				continue
			}
			t, c := d.resolveDepth(em, depth+1)
			out = merge(out, t)
			conds = append(conds, c...)
		}
	}
	return out, conds
}

// merge overlays b on a: properties and items merge recursively (each side
// resolved first), required is a union, enums intersect, "not"s
// accumulate, everything else in b wins. Neither input is modified.
func merge(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for _, k := range keys(b) {
		v := b[k]
		switch k {
		case "properties":
			am, _ := out[k].(map[string]any)
			bm, _ := v.(map[string]any)
			if am == nil || bm == nil {
				out[k] = v
				continue
			}
			pm := make(map[string]any, len(am)+len(bm))
			order := keys(am)
			for _, pk := range keys(am) {
				pm[pk] = am[pk]
			}
			for _, pk := range keys(bm) {
				if prev, ok := pm[pk].(map[string]any); ok {
					if nb, ok := bm[pk].(map[string]any); ok {
						pm[pk] = mergeRefs(prev, nb)
						continue
					}
				}
				if _, ok := pm[pk]; !ok {
					order = append(order, pk)
				}
				pm[pk] = bm[pk]
			}
			pm[orderKey] = order
			out[k] = pm
		case "items", "contains", "additionalProperties":
			am, aok := out[k].(map[string]any)
			bm, bok := v.(map[string]any)
			if aok && bok {
				out[k] = mergeRefs(am, bm)
			} else {
				out[k] = v
			}
		case "required":
			var req []any
			seen := map[string]bool{}
			for _, list := range []any{out[k], v} {
				l, _ := list.([]any)
				for _, e := range l {
					if s, ok := e.(string); ok && !seen[s] {
						seen[s] = true
						req = append(req, s)
					}
				}
			}
			out[k] = req
		case "enum":
			ae, aok := out[k].([]any)
			be, _ := v.([]any)
			if aok {
				var both []any
				for _, x := range ae {
					if slices.ContainsFunc(be, func(y any) bool { return equalJSON(x, y) }) {
						both = append(both, x)
					}
				}
				if len(both) > 0 {
					out[k] = both
					continue
				}
			}
			out[k] = be
		case "not":
			if prev, ok := out["not"]; ok {
				out["\x00nots"] = append(asList(out["\x00nots"]), prev)
			}
			out["not"] = v
		case "\x00nots":
			out[k] = append(asList(out[k]), asList(v)...)
		case "if", "then", "else":
			// Conditionals of an overlay are kept as an allOf entry so
			// resolve sees them beside the base's own.
			continue
		case orderKey:
			continue
		default:
			out[k] = v
		}
	}
	if _, ok := b["if"]; ok {
		entry := map[string]any{"if": b["if"]}
		if t, ok := b["then"]; ok {
			entry["then"] = t
		}
		if e, ok := b["else"]; ok {
			entry["else"] = e
		}
		out["allOf"] = append(slices.Clone(asList(out["allOf"])), entry)
	}
	ao, _ := a[orderKey].([]string)
	bo, _ := b[orderKey].([]string)
	order := slices.Clone(ao)
	for _, k := range bo {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	out[orderKey] = order
	return out
}

// mergeRefs merges two subschemas that may each be a bare $ref: the $ref
// stays on the merged schema so resolve follows it, and the overlay's
// keywords sit beside it (2020-12 applies $ref siblings too).
func mergeRefs(a, b map[string]any) map[string]any {
	if _, ok := b["$ref"]; ok {
		if _, ok := a["$ref"]; ok {
			// Both refer: keep a's ref, add b's as an allOf entry.
			m := merge(a, map[string]any{})
			m["allOf"] = append(slices.Clone(asList(a["allOf"])), b)
			return m
		}
	}
	return merge(a, b)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// nots are every "not" of a flattened schema.
func nots(s map[string]any) []map[string]any {
	var out []map[string]any
	if n, ok := s["not"].(map[string]any); ok {
		out = append(out, n)
	}
	for _, e := range asList(s["\x00nots"]) {
		if n, ok := e.(map[string]any); ok {
			out = append(out, n)
		}
	}
	return out
}

// types lists the allowed JSON types of a flattened schema; inferred from
// its keywords when "type" is absent.
func types(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	switch {
	case s["properties"] != nil || s["required"] != nil || s["additionalProperties"] != nil:
		return []string{"object"}
	case s["items"] != nil || s["minItems"] != nil || s["maxItems"] != nil || s["contains"] != nil:
		return []string{"array"}
	case s["minimum"] != nil || s["maximum"] != nil || s["exclusiveMinimum"] != nil || s["exclusiveMaximum"] != nil:
		return []string{"number"}
	}
	return []string{"string"}
}

func num(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	}
	return 0, false
}

func intKw(s map[string]any, k string, def int) int {
	if f, ok := num(s[k]); ok {
		return int(f)
	}
	return def
}

var (
	reCacheMu sync.Mutex
	reCache   = map[string]*regexp.Regexp{}
)

// compilePattern compiles a JSON Schema pattern (unanchored) with Go's RE2;
// nil when RE2 cannot read it.
func compilePattern(p string) *regexp.Regexp {
	reCacheMu.Lock()
	defer reCacheMu.Unlock()
	if re, ok := reCache[p]; ok {
		return re
	}
	re, err := regexp.Compile(p)
	if err != nil {
		re = nil
	}
	reCache[p] = re
	return re
}

// matches is a small JSON Schema evaluator used to decide conditionals and
// to check a candidate against an overlay. Keywords it does not know pass;
// the full validator has the last word.
func (d *schemaDoc) matches(s map[string]any, v any) bool {
	return d.matchesDepth(s, v, 0)
}

func (d *schemaDoc) matchesDepth(s map[string]any, v any, depth int) bool {
	if s == nil || depth > 32 {
		return true
	}
	if r, ok := s["$ref"].(string); ok {
		if !d.matchesDepth(d.ref(r), v, depth+1) {
			return false
		}
	}
	if c, ok := s["const"]; ok && !equalJSON(c, v) {
		return false
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return equalJSON(x, v) }) {
		return false
	}
	for _, n := range nots(s) {
		if d.matchesDepth(n, v, depth+1) {
			return false
		}
	}
	if _, ok := s["type"]; ok && !typeOK(types(s), v) {
		return false
	}
	for _, e := range asList(s["allOf"]) {
		if em, ok := e.(map[string]any); ok && !d.matchesDepth(em, v, depth+1) {
			return false
		}
	}
	if l := asList(s["anyOf"]); len(l) > 0 {
		if !slices.ContainsFunc(l, func(e any) bool { em, _ := e.(map[string]any); return d.matchesDepth(em, v, depth+1) }) {
			return false
		}
	}
	if l := asList(s["oneOf"]); len(l) > 0 {
		n := 0
		for _, e := range l {
			if em, _ := e.(map[string]any); d.matchesDepth(em, v, depth+1) {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	if ifS, ok := s["if"].(map[string]any); ok {
		if d.matchesDepth(ifS, v, depth+1) {
			if t, ok := s["then"].(map[string]any); ok && !d.matchesDepth(t, v, depth+1) {
				return false
			}
		} else if e, ok := s["else"].(map[string]any); ok && !d.matchesDepth(e, v, depth+1) {
			return false
		}
	}
	switch t := v.(type) {
	case *Obj:
		for _, r := range asList(s["required"]) {
			if name, ok := r.(string); ok && !t.Has(name) {
				return false
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, pv := range t.M {
			if ps, ok := props[k].(map[string]any); ok {
				if !d.matchesDepth(ps, pv, depth+1) {
					return false
				}
			} else if ap, ok := s["additionalProperties"]; ok {
				if b, ok := ap.(bool); ok && !b {
					return false
				}
				if am, ok := ap.(map[string]any); ok && !d.matchesDepth(am, pv, depth+1) {
					return false
				}
			}
		}
	case []any:
		if n := intKw(s, "minItems", -1); n >= 0 && len(t) < n {
			return false
		}
		if n := intKw(s, "maxItems", -1); n >= 0 && len(t) > n {
			return false
		}
		if im, ok := s["items"].(map[string]any); ok {
			for _, e := range t {
				if !d.matchesDepth(im, e, depth+1) {
					return false
				}
			}
		}
		if cm, ok := s["contains"].(map[string]any); ok {
			if !slices.ContainsFunc(t, func(e any) bool { return d.matchesDepth(cm, e, depth+1) }) {
				return false
			}
		}
		if u, _ := s["uniqueItems"].(bool); u {
			for i := range t {
				for j := i + 1; j < len(t); j++ {
					if equalJSON(t[i], t[j]) {
						return false
					}
				}
			}
		}
	case string:
		n := utf8.RuneCountInString(t)
		if m := intKw(s, "minLength", -1); m >= 0 && n < m {
			return false
		}
		if m := intKw(s, "maxLength", -1); m >= 0 && n > m {
			return false
		}
		if p, ok := s["pattern"].(string); ok {
			if re := compilePattern(p); re != nil && !re.MatchString(t) {
				return false
			}
		}
	default:
		if f, ok := num(v); ok {
			if m, ok := num(s["minimum"]); ok && f < m {
				return false
			}
			if m, ok := num(s["maximum"]); ok && f > m {
				return false
			}
			if m, ok := num(s["exclusiveMinimum"]); ok && f <= m {
				return false
			}
			if m, ok := num(s["exclusiveMaximum"]); ok && f >= m {
				return false
			}
		}
	}
	return true
}

func typeOK(ts []string, v any) bool {
	for _, t := range ts {
		switch t {
		case "object":
			if _, ok := v.(*Obj); ok {
				return true
			}
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		case "number":
			if _, ok := num(v); ok {
				return true
			}
		case "integer":
			if f, ok := num(v); ok && f == math.Trunc(f) {
				return true
			}
		}
	}
	return false
}
