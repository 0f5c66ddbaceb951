package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/contractd/contractd/contracts"
)

// Path is a compiled policy path: an RFC 6901 JSON Pointer in which a token
// that is exactly "*" matches any array index or object key. There is no way
// to address a key literally named "*"; "~0" and "~1" escape "~" and "/" as
// usual. The zero Path is "" and addresses the whole document.
type Path struct {
	raw    string
	tokens []string // unescaped, for lookups
	esc    []string // escaped as written, for building pointers
	wild   []bool
}

// ParsePath compiles s. It rejects pointers that do not start with "/"
// (unless empty) and "~" escapes other than "~0" and "~1", because a typo in
// a policy path would otherwise silently match nothing.
func ParsePath(s string) (Path, error) {
	if s == "" {
		return Path{}, nil
	}
	if s[0] != '/' {
		return Path{}, fmt.Errorf("path %q: must start with \"/\"", s)
	}
	tokens, err := contracts.PointerTokens(s)
	var pe *contracts.PointerError
	if errors.As(err, &pe) {
		return Path{}, fmt.Errorf("path %q: bad escape in %q (write ~0 for \"~\" and ~1 for \"/\")", s, pe.Segment)
	}
	parts := strings.Split(s[1:], "/")
	p := Path{raw: s, tokens: tokens, esc: parts, wild: make([]bool, len(parts))}
	for i, part := range parts {
		p.wild[i] = part == "*"
	}
	return p, nil
}

// String returns the path as written.
func (p Path) String() string { return p.raw }

// tokensWild is the path as contracts.PathPolicy states it.
func (p Path) tokensWild() ([]string, []bool) { return p.tokens, p.wild }

// HasWildcard reports whether any token is "*", i.e. whether the path may
// match more than one value.
func (p Path) HasWildcard() bool { return slices.Contains(p.wild, true) }

// Walk calls fn for every value v matches, with its concrete escaped pointer
// (valid only during the call: a caller that keeps it makes it a string,
// which most need only for a violation).
// Order is deterministic (array index order, object keys in byte order) so
// evidence lists and messages come out the same for the same output.
func (p Path) Walk(v any, fn func(ptr []byte, v any)) {
	// The pointer is built in one buffer and copied into a string only
	// for a value that matches, not at every level of the walk.
	var buf [128]byte
	p.walk(v, 0, buf[:0], fn)
}

func (p Path) walk(v any, i int, ptr []byte, fn func([]byte, any)) {
	if i == len(p.tokens) {
		fn(ptr, v)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if p.wild[i] {
			for _, k := range slices.Sorted(maps.Keys(x)) {
				p.walk(x[k], i+1, append(append(ptr, '/'), contracts.EscapePointerToken(k)...), fn)
			}
			return
		}
		if c, ok := x[p.tokens[i]]; ok {
			p.walk(c, i+1, append(append(ptr, '/'), p.esc[i]...), fn)
		}
	case []any:
		if p.wild[i] {
			for n, c := range x {
				p.walk(c, i+1, strconv.AppendInt(append(ptr, '/'), int64(n), 10), fn)
			}
			return
		}
		if n, ok := contracts.PointerIndex(p.tokens[i]); ok && n < len(x) {
			p.walk(x[n], i+1, append(append(ptr, '/'), p.esc[i]...), fn)
		}
	}
}

// deepestExisting follows the path's literal tokens (up to the first "*")
// through v and returns the pointer of the last node that exists. It names
// where a missing value should have been.
func (p Path) deepestExisting(v any) string {
	ptr := ""
	for i, tok := range p.tokens {
		if p.wild[i] {
			break
		}
		var next any
		ok := false
		switch x := v.(type) {
		case map[string]any:
			next, ok = x[tok]
		case []any:
			if n, isIdx := contracts.PointerIndex(tok); isIdx && n < len(x) {
				next, ok = x[n], true
			}
		}
		if !ok {
			break
		}
		ptr += "/" + p.esc[i]
		v = next
	}
	return ptr
}

// The policies that read the output only along their path.
var (
	_ contracts.PathPolicy = (*LabelPolicy)(nil)
	_ contracts.PathPolicy = (*ForbiddenPolicy)(nil)
	_ contracts.PathPolicy = (*EvidencePolicy)(nil)
	_ contracts.PathPolicy = (*QuestionPolicy)(nil)
)
