package retry

import (
	"bytes"
	"encoding/base64"
	"errors"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// The pre-tokenizer patterns of tiktoken-go's encodings, which
// TestRankCounterAgrees holds these counts to. o200k's and cl100k's run
// written out (split.go); p50k's through regexp2.
const (
	patO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patCl100k = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patP50k   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// encodingFiles names each encoding's embedded rank file and pattern;
// an encoding not listed (tiktoken's gpt2) has no counter.
var encodingFiles = map[string]struct {
	file, pat string
	split     func(string) int
}{
	tiktoken.MODEL_O200K_BASE:  {"o200k_base.tiktoken", patO200k, splitO200k},
	tiktoken.MODEL_CL100K_BASE: {"cl100k_base.tiktoken", patCl100k, splitCl100k},
	tiktoken.MODEL_P50K_BASE:   {"p50k_base.tiktoken", patP50k, nil},
	tiktoken.MODEL_P50K_EDIT:   {"p50k_base.tiktoken", patP50k, nil},
	tiktoken.MODEL_R50K_BASE:   {"r50k_base.tiktoken", patP50k, nil},
}

// rankCounter counts tokens as tiktoken's ordinary encoding does: the
// text split by the encoding's pattern, each piece byte-pair merged by
// rank. Its ranks live in a rankTable, which holds no pointers: o200k's
// 200k tokens as tiktoken-go keeps them (a map of strings, its inverse
// and a sorted copy) are 24 MB and 300k objects of live heap that every
// collection marks, about 15 ms of CPU per cycle, for as long as the
// process runs.
type rankCounter struct {
	re *regexp2.Regexp // nil when split is set
	// split is the pattern written out (splitO200k, splitCl100k).
	split func(s string) int
	ranks rankTable
}

func newRankCounter(name string) (*rankCounter, error) {
	def, ok := encodingFiles[name]
	if !ok {
		return nil, errors.New("unknown encoding " + name)
	}
	var re *regexp2.Regexp
	if def.split == nil {
		var err error
		if re, err = regexp2.Compile(def.pat, regexp2.None); err != nil {
			return nil, err
		}
	}
	data, err := assets.Assets.ReadFile(def.file)
	if err != nil {
		return nil, err
	}
	c := &rankCounter{re: re, split: def.split}
	if err := c.ranks.load(data); err != nil {
		return nil, err
	}
	return c, nil
}

// count is the number of tokens in s. Pieces are cut from s read as
// runes, as tiktoken-go does (invalid UTF-8 counts as U+FFFD).
func (c *rankCounter) count(s string) int {
	if c.split == nil {
		return c.countMatches(s)
	}
	var buf [64]byte
	n := 0
	for s != "" {
		end := c.split(s)
		piece := append(buf[:0], s[:end]...)
		if !utf8.Valid(piece) {
			piece = buf[:0]
			for _, r := range s[:end] {
				piece = utf8.AppendRune(piece, r)
			}
		}
		n += c.ranks.pieceTokens(piece)
		s = s[end:]
	}
	return n
}

// countMatches is count with the pattern run by regexp2.
func (c *rankCounter) countMatches(s string) int {
	runes := []rune(s)
	var buf [64]byte
	n := 0
	m, _ := c.re.FindRunesMatch(runes)
	for m != nil {
		piece := buf[:0]
		for _, r := range runes[m.Index : m.Index+m.Length] {
			piece = utf8.AppendRune(piece, r)
		}
		n += c.ranks.pieceTokens(piece)
		m, _ = c.re.FindNextMatch(m)
	}
	return n
}

// rankTable maps token bytes to ranks in four slices of plain numbers, so
// the collector scans none of them: the tokens' bytes back to back, where
// each one ends, its rank, and an open-addressed index of token numbers
// (plus one; 0 is empty).
type rankTable struct {
	bytes []byte
	ends  []uint32
	rank  []int32
	index []uint32
	seed  maphash.Seed
}

// load reads a tiktoken rank file: one token a line, its bytes in base64,
// a space, its rank. A token listed twice keeps its last rank.
func (t *rankTable) load(data []byte) error {
	lines := bytes.Count(data, []byte{'\n'}) + 1
	t.bytes = make([]byte, 0, base64.StdEncoding.DecodedLen(len(data)))
	t.ends = make([]uint32, 0, lines)
	t.rank = make([]int32, 0, lines)
	size := 1
	for size < 2*lines {
		size <<= 1
	}
	t.index = make([]uint32, size)
	t.seed = maphash.MakeSeed()
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 {
			continue
		}
		tok, num, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return errors.New("rank file: a line without a rank")
		}
		r, err := strconv.Atoi(string(num))
		if err != nil || r < 0 || r > math.MaxInt32 {
			return errors.New("rank file: bad rank " + strconv.Quote(string(num)))
		}
		from := len(t.bytes)
		if t.bytes, err = base64.StdEncoding.AppendDecode(t.bytes, tok); err != nil {
			return err
		}
		if len(t.bytes) > math.MaxUint32 {
			return errors.New("rank file too large")
		}
		slot := t.slot(t.bytes[from:])
		if id := t.index[slot]; id != 0 {
			t.rank[id-1] = int32(r)
			t.bytes = t.bytes[:from]
			continue
		}
		t.ends = append(t.ends, uint32(len(t.bytes)))
		t.rank = append(t.rank, int32(r))
		t.index[slot] = uint32(len(t.ends))
	}
	t.bytes = slices.Clone(t.bytes) // its room was the base64 length
	return nil
}

func (t *rankTable) token(id uint32) []byte {
	from := uint32(0)
	if id > 0 {
		from = t.ends[id-1]
	}
	return t.bytes[from:t.ends[id]]
}

// slot is where b is indexed, or the empty slot where it would be. The
// index is at most half full, so a probe always ends.
func (t *rankTable) slot(b []byte) uint64 {
	mask := uint64(len(t.index) - 1)
	i := maphash.Bytes(t.seed, b) & mask
	for {
		id := t.index[i]
		if id == 0 || bytes.Equal(t.token(id-1), b) {
			return i
		}
		i = (i + 1) & mask
	}
}

func (t *rankTable) get(b []byte) (int, bool) {
	id := t.index[t.slot(b)]
	if id == 0 {
		return 0, false
	}
	return int(t.rank[id-1]), true
}

// pieceTokens is the number of tokens tiktoken's byte-pair merge makes of
// one piece: 1 for a known token or a single byte, else the parts left
// after merging, lowest rank first (the leftmost of equal ranks).
func (t *rankTable) pieceTokens(piece []byte) int {
	if _, ok := t.get(piece); ok || len(piece) == 1 {
		return 1
	}
	type part struct{ start, rank int }
	var small [64]part
	parts := small[:0]
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, part{i, math.MaxInt})
	}
	rankAt := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := t.get(piece[parts[i].start:parts[i+skip+2].start]); ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rankAt(i, 0)
	}
	for len(parts) > 1 {
		min, at := math.MaxInt, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < min {
				min, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = rankAt(at, 1)
		if at > 0 {
			parts[at-1].rank = rankAt(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}
