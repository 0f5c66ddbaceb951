package policy

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/contractd/contractd/contracts"
)

// LeakWords is how many consecutive system-prompt words make a leak.
const LeakWords = 12

// PromptLeakIndex is the set of LeakWords-word shingles of one system
// prompt, built once so each output string is checked in one pass. Words are
// what strings.Fields yields and compare case-insensitively (Unicode simple
// folding, as strings.EqualFold). A prompt with fewer than LeakWords words
// (but at least one) leaks when all of its words appear consecutively; a
// prompt with no words never leaks.
type PromptLeakIndex struct {
	prompt string
	k      int    // shingle length: min(LeakWords, words in prompt)
	words  []span // byte ranges of the prompt's words
	table  []slot // open addressing: shingle hash → index of its first word
	bk     uint64 // hashBase^k, to drop the oldest word while rolling
}

type span struct{ start, end int32 }

// slot is a table entry; j is the word index plus one, so 0 means empty.
// A hand-rolled table instead of a map: building the index is one
// allocation, which matters when prompts embed the input and miss the cache.
type slot struct {
	h uint64
	j int32
}

type ringSlot struct {
	h          uint64
	start, end int
}

// hashBase is an odd multiplier for the rolling polynomial over word hashes.
const hashBase = 0x9e3779b97f4a7c15

// NewPromptLeakIndex indexes prompt.
func NewPromptLeakIndex(prompt string) *PromptLeakIndex {
	ix := &PromptLeakIndex{prompt: prompt}
	est := len(prompt)/6 + 16 // typical prose: a word per 5–6 bytes
	ix.words = make([]span, 0, est)
	hashes := make([]uint64, 0, est)
	it := words{s: prompt}
	for {
		start, end, h, ok := it.next()
		if !ok {
			break
		}
		ix.words = append(ix.words, span{int32(start), int32(end)})
		hashes = append(hashes, h)
	}
	ix.k = min(LeakWords, len(hashes))
	if ix.k == 0 {
		return ix
	}
	ix.bk = pow(hashBase, ix.k)
	size := 8
	for size < 2*(len(hashes)-ix.k+1) {
		size *= 2
	}
	ix.table = make([]slot, size)
	var h uint64
	for i, w := range hashes {
		h = h*hashBase + w
		if i >= ix.k {
			h -= hashes[i-ix.k] * ix.bk
		}
		if i >= ix.k-1 {
			ix.insert(h, i-ix.k+1)
		}
	}
	return ix
}

// Leaks reports whether s contains k consecutive words equal (ignoring case)
// to k consecutive words of the prompt.
func (ix *PromptLeakIndex) Leaks(s string) bool {
	if ix.k == 0 {
		return false
	}
	k := ix.k
	var ring [LeakWords]ringSlot
	n := 0
	var h uint64
	it := words{s: s}
	for {
		start, end, w, ok := it.next()
		if !ok {
			return false
		}
		pos := n % k
		h = h*hashBase + w
		if n >= k {
			h -= ring[pos].h * ix.bk
		}
		ring[pos] = ringSlot{w, start, end}
		n++
		if n < k {
			continue
		}
		if j, hit := ix.lookup(h); hit && ix.confirm(s, &ring, n, j) {
			return true
		}
	}
}

// insert keeps the first word index for a hash: a later window with the same
// hash is either the same words (any one confirms) or a collision.
func (ix *PromptLeakIndex) insert(h uint64, j int) {
	mask := uint64(len(ix.table) - 1)
	for i := mix(h) & mask; ; i = (i + 1) & mask {
		e := &ix.table[i]
		if e.j == 0 {
			e.h, e.j = h, int32(j+1)
			return
		}
		if e.h == h {
			return
		}
	}
}

func (ix *PromptLeakIndex) lookup(h uint64) (int, bool) {
	mask := uint64(len(ix.table) - 1)
	for i := mix(h) & mask; ; i = (i + 1) & mask {
		e := ix.table[i]
		if e.j == 0 {
			return 0, false
		}
		if e.h == h {
			return int(e.j - 1), true
		}
	}
}

// mix spreads the rolling hash's high bits into the low bits the table
// indexes by (the polynomial's low bits depend mostly on the last word).
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// confirm compares the window ending at word n of s with the prompt's words
// from j, so a hash collision never rejects an output.
func (ix *PromptLeakIndex) confirm(s string, ring *[LeakWords]ringSlot, n, j int) bool {
	for i := range ix.k {
		r := ring[(n+i)%ix.k]
		pw := ix.words[j+i]
		if !strings.EqualFold(s[r.start:r.end], ix.prompt[pw.start:pw.end]) {
			return false
		}
	}
	return true
}

// words yields the strings.Fields words of a string with their byte ranges
// and case-folded hashes. It is an iterator struct rather than a callback so
// the per-byte loop stays tight: this is the hot path of every check.
type words struct {
	s string
	i int
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// asciiFold maps ASCII bytes to their folded form, and whitespace to
// asciiSpace.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := range utf8.RuneSelf {
		t[c] = byte(foldRune(rune(c)))
	}
	for _, c := range "\t\n\v\f\r " {
		t[c] = asciiSpace
	}
	return t
}()

const asciiSpace = 0xff

func (w *words) next() (start, end int, h uint64, ok bool) {
	s, i := w.s, w.i
	// Skip leading whitespace.
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiFold[c] != asciiSpace {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += size
	}
	if i >= len(s) {
		w.i = i
		return 0, 0, 0, false
	}
	start, h = i, fnvOffset
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			f := asciiFold[c]
			if f == asciiSpace {
				break
			}
			h = (h ^ uint64(f)) * fnvPrime
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			break
		}
		h = (h ^ uint64(foldRune(r))) * fnvPrime
		i += size
	}
	w.i = i
	return start, i, h, true
}

// foldRune maps every rune of a simple-folding orbit to one representative,
// so equal hashes agree with strings.EqualFold: the orbit's smallest rune,
// with ASCII letters lowercased so the ASCII fast path needs no table.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	if 'A' <= m && m <= 'Z' {
		m += 'a' - 'A'
	}
	return m
}

func pow(b uint64, e int) uint64 {
	p := uint64(1)
	for range e {
		p *= b
	}
	return p
}

// PromptLeakPolicy reports every string anywhere in the output (object keys
// excluded) that contains LeakWords consecutive words of the rendered system
// prompt, or the whole prompt when it is shorter (see PromptLeakIndex); rule
// "prompt_leak" at that string's pointer. An empty Subject.SystemPrompt
// skips the check (offline check without a route).
//
// Indexes are cached per prompt text, because most routes render the same
// system prompt for every request. Prompts that embed the input mostly miss;
// the cache is bounded so they cannot grow it, and building an index for a
// 2 KB prompt costs about as much as one check.
type PromptLeakPolicy struct {
	mu    sync.RWMutex
	cache map[string]*PromptLeakIndex
}

const promptLeakCacheSize = 64

// NewPromptLeak returns the prompt_leak policy.
func NewPromptLeak() contracts.Policy {
	return &PromptLeakPolicy{cache: map[string]*PromptLeakIndex{}}
}

func (p *PromptLeakPolicy) index(prompt string) *PromptLeakIndex {
	p.mu.RLock()
	ix := p.cache[prompt]
	p.mu.RUnlock()
	if ix != nil {
		return ix
	}
	ix = NewPromptLeakIndex(prompt)
	p.mu.Lock()
	if len(p.cache) >= promptLeakCacheSize {
		for k := range p.cache { // evict an arbitrary entry
			delete(p.cache, k)
			break
		}
	}
	p.cache[prompt] = ix
	p.mu.Unlock()
	return ix
}

// Check implements contracts.Policy.
func (p *PromptLeakPolicy) Check(out any, s *contracts.Subject) ([]contracts.Violation, []contracts.Evidence) {
	if s == nil || s.SystemPrompt == "" {
		return nil, nil
	}
	ix := p.index(s.SystemPrompt)
	if ix.k == 0 {
		return nil, nil
	}
	msg := "contains " + strconv.Itoa(LeakWords) + " consecutive words of the system prompt"
	if ix.k < LeakWords {
		msg = "contains the whole system prompt"
	}
	var vs []contracts.Violation
	var stack []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if ix.Leaks(x) {
				vs = append(vs, contracts.Violation{
					Kind: contracts.KindPolicy, Path: joinPointer(stack), Rule: RulePromptLeak, Message: msg,
				})
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				stack = append(stack, contracts.EscapePointerToken(k))
				walk(x[k])
				stack = stack[:len(stack)-1]
			}
		case []any:
			for i, c := range x {
				stack = append(stack, strconv.Itoa(i))
				walk(c)
				stack = stack[:len(stack)-1]
			}
		}
	}
	walk(out)
	return contracts.SortViolations(vs), nil
}

func joinPointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	return "/" + strings.Join(tokens, "/")
}
