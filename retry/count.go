package retry

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Counter counts the tokens of a text offline. Implementations are
// deterministic and safe for concurrent use.
type Counter interface {
	Count(s string) int
}

// Per-message overhead added by CountMessages. OpenAI's chat format wraps
// every message as <|start|>{role}<|message|>{content}<|end|>: three
// framing tokens plus one for the role name (system, user and assistant
// are one token each), and every reply is primed with
// <|start|>assistant<|message|>, three more tokens per request.
const (
	MessageOverheadTokens = 4
	ReplyOverheadTokens   = 3
)

// CountMessages is the offline input count of one attempt: the tokens of
// every message content sent (system included), plus
// MessageOverheadTokens per message and ReplyOverheadTokens once. No
// messages count as 0.
func CountMessages(c Counter, msgs []string) int {
	if len(msgs) == 0 {
		return 0
	}
	return CountMessagesAfter(c, c.Count(msgs[0]), msgs[1:])
}

// CountMessagesAfter is CountMessages of a first message whose content
// counts first tokens (kept from an earlier count) followed by msgs.
func CountMessagesAfter(c Counter, first int, msgs []string) int {
	n := ReplyOverheadTokens + first + MessageOverheadTokens
	for _, m := range msgs {
		n += c.Count(m) + MessageOverheadTokens
	}
	return n
}

// CountOnce keeps the count of one fixed text by one fixed Counter, made
// on first use: a route's static system prompt is counted once, not on
// every request. The zero value is ready; it is safe for concurrent use
// (two first uses at once both count, with the same result).
type CountOnce struct {
	n atomic.Int64 // the count plus one; 0 until counted
}

// Count returns c's count of s, made on the first call only: every call
// must pass the same c and s.
func (o *CountOnce) Count(c Counter, s string) int {
	if n := o.n.Load(); n != 0 {
		return int(n - 1)
	}
	n := c.Count(s)
	o.n.Store(int64(n) + 1)
	return n
}

// Estimator is the Counter used when a model's tokenizer is unknown or
// cannot be loaded. It counts max(ceil(bytes/4), words), where bytes is the
// UTF-8 length and words the number of whitespace-separated fields.
// Four bytes per token is the usual rule of thumb for English with OpenAI
// tokenizers; counting bytes rather than characters makes non-Latin
// scripts (2-4 bytes per character, and roughly one token per character)
// come out closer to the truth, and the word floor keeps text made of many
// short words from being undercounted, since every word costs a token.
type Estimator struct{}

// Count implements Counter.
func (Estimator) Count(s string) int {
	n := (len(s) + 3) / 4
	if w := countFields(s); w > n {
		n = w
	}
	return n
}

func countFields(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// bpeCounter counts with a tiktoken encoding. Text that looks like a
// special token (<|endoftext|>) is counted as ordinary text, which is how
// the upstream sees client content.
type bpeCounter struct {
	enc  *rankCounter
	name string
}

func (b *bpeCounter) Count(s string) int {
	n := 0
	for s != "" {
		end := segmentEnd(s)
		n += b.enc.count(s[:end])
		s = s[end:]
	}
	return n
}

// maxRunBytes bounds the pieces handed to the byte pair merge, which is
// quadratic in the length of one pre-tokenizer piece (as tiktoken-go's
// is), and regexp2 (p50k's pattern) backtracks quadratically on long
// whitespace, so 20 KB of "x" (or of unpunctuated CJK, or of spaces)
// takes seconds to count: a client could stall every request with one
// body. A piece of the cl100k/o200k/p50k pre-tokenizers never leaves a
// run of letters and marks, of symbols and punctuation, or of whitespace
// (digits come in threes), so text is counted in segments cut before any
// such run grows past maxRunBytes. Real text has no such run and is
// counted exactly, in one segment; a longer run is counted in 256-byte
// slices, which may add a token per slice.
const maxRunBytes = 256

// segmentEnd is the length of the longest prefix of s in which no run of
// one piece class exceeds maxRunBytes: len(s) for ordinary text.
func segmentEnd(s string) int {
	var letters, symbols, spaces int
	for i := 0; i < len(s); {
		_, c, size := classAt(s, i)
		letter, space, symbol := runKinds(c)
		letters = grow(letters, size, letter)
		spaces = grow(spaces, size, space)
		symbols = grow(symbols, size, symbol)
		if letters > maxRunBytes || symbols > maxRunBytes || spaces > maxRunBytes {
			return i
		}
		i += size
	}
	return len(s)
}

// runKinds is which runs a rune of class c (split.go's classes) belongs
// to: letters and marks, whitespace, and [^\s\p{L}\p{N}] (a mark is in
// the first and the last).
func runKinds(c uint8) (letter, space, symbol bool) {
	return c&(cLetter|cUpper|cLower) != 0, c&cSpace != 0, isOther(c)
}

func grow(run, size int, in bool) int {
	if in {
		return run + size
	}
	return 0
}

func init() {
	// tiktoken-go fetches encodings over HTTP by default. contractd must
	// never do that: it counts from the embedded rank files itself, and
	// the embedded offline loader is installed before any tiktoken-go
	// encoding can be requested (package init runs before any caller).
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
}

type encodingSlot struct {
	once sync.Once
	c    Counter // nil when loading failed
}

var (
	encodingsMu sync.Mutex
	encodings   = map[string]*encodingSlot{}
)

// loadEncoding returns the counter for a tiktoken encoding, building it
// at most once per process; nil when it cannot be built.
func loadEncoding(name string) Counter {
	encodingsMu.Lock()
	slot, ok := encodings[name]
	if !ok {
		slot = &encodingSlot{}
		encodings[name] = slot
	}
	encodingsMu.Unlock()
	slot.once.Do(func() {
		defer func() {
			// A malformed embedded asset must degrade to the estimator,
			// not take the proxy down.
			if recover() != nil {
				slot.c = nil
			}
		}()
		enc, err := newRankCounter(name)
		if err == nil {
			slot.c = &bpeCounter{enc: enc, name: name}
		}
	})
	return slot.c
}

// Encoding names, as tiktoken spells them.
const (
	encO200k  = tiktoken.MODEL_O200K_BASE
	encCl100k = tiktoken.MODEL_CL100K_BASE
)

// modelPrefixes maps model-name prefixes to encodings, checked in order
// (more specific first). A prefix ending in '-' also matches the bare
// name without it: "o1-" matches "o1" and "o1-mini" but not "o10".
var modelPrefixes = []struct{ prefix, enc string }{
	{"gpt-5", encO200k},
	{"gpt-4.5", encO200k},
	{"gpt-4.1", encO200k},
	{"gpt-4o", encO200k},
	{"chatgpt-4o", encO200k},
	{"gpt-oss", encO200k}, // o200k_harmony: o200k_base plus special tokens only
	{"o1-", encO200k},
	{"o3-", encO200k},
	{"o4-", encO200k},
	{"gpt-4", encCl100k},
	{"gpt-3.5", encCl100k},
	{"gpt-35", encCl100k}, // Azure's spelling
}

// EncodingFor names the tiktoken encoding used for model, or "" when the
// model is unknown and the Estimator applies. The name is matched
// case-insensitively after dropping a provider prefix ("openai/gpt-4o")
// and a fine-tune wrapper ("ft:gpt-4o-mini:org::id"); tiktoken's own
// model table is consulted first, then the prefixes above.
func EncodingFor(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if rest, ok := strings.CutPrefix(m, "ft:"); ok {
		m, _, _ = strings.Cut(rest, ":")
	}
	if m == "" {
		return ""
	}
	if enc, ok := tiktoken.MODEL_TO_ENCODING[m]; ok {
		return enc
	}
	for _, p := range modelPrefixes {
		if strings.HasPrefix(m, p.prefix) {
			return p.enc
		}
		if bare, ok := strings.CutSuffix(p.prefix, "-"); ok && m == bare {
			return p.enc
		}
	}
	return ""
}

// CounterFor returns the Counter for model: its tiktoken encoding when
// EncodingFor knows one and it loads, else Estimator. Each encoding is
// loaded once per process, from data embedded in the binary.
func CounterFor(model string) Counter {
	if enc := EncodingFor(model); enc != "" {
		if c := loadEncoding(enc); c != nil {
			return c
		}
	}
	return Estimator{}
}
