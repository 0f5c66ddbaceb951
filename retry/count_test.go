package retry

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
)

func TestEncodingFor(t *testing.T) {
	tests := []struct{ model, want string }{
		{"gpt-4o", "o200k_base"},
		{"gpt-4o-mini", "o200k_base"},
		{"gpt-4o-2024-08-06", "o200k_base"},
		{"chatgpt-4o-latest", "o200k_base"},
		{"gpt-4.1", "o200k_base"},
		{"gpt-4.1-nano-2025-04-14", "o200k_base"},
		{"gpt-4.5-preview", "o200k_base"},
		{"gpt-5-mini", "o200k_base"},
		{"o1", "o200k_base"},
		{"o1-mini", "o200k_base"},
		{"o3-mini", "o200k_base"},
		{"o4-mini", "o200k_base"},
		{"gpt-oss-20b", "o200k_base"},
		{"gpt-4", "cl100k_base"},
		{"gpt-4-turbo", "cl100k_base"},
		{"gpt-4-32k", "cl100k_base"},
		{"gpt-3.5-turbo", "cl100k_base"},
		{"gpt-3.5-turbo-0125", "cl100k_base"},
		{"gpt-35-turbo", "cl100k_base"},
		{"text-embedding-3-small", "cl100k_base"},
		{"text-davinci-003", "p50k_base"},
		{"GPT-4o-Mini", "o200k_base"},
		{" gpt-4o ", "o200k_base"},
		{"openai/gpt-4o-mini", "o200k_base"},
		{"ft:gpt-4o-mini-2024-07-18:acme::9abc", "o200k_base"},
		{"ft:gpt-3.5-turbo:acme:x:1", "cl100k_base"},
		{"o10", ""},
		{"o", ""},
		{"llama-3.1-70b", ""},
		{"claude-3-5-sonnet", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := EncodingFor(tt.model); got != tt.want {
			t.Errorf("EncodingFor(%q) = %q, want %q", tt.model, got, tt.want)
		}
	}
}

func TestCounterFor(t *testing.T) {
	tests := []struct {
		model    string
		encoding string // "" means Estimator
		text     string
		want     int
	}{
		{"gpt-4o-mini", "o200k_base", "hello world", 2},
		{"o3-mini", "o200k_base", "hello world", 2},
		{"gpt-4", "cl100k_base", "hello world", 2},
		{"gpt-4o", "o200k_base", "", 0},
		// Special-token text is ordinary client content, never a panic.
		{"gpt-4o", "o200k_base", "<|endoftext|>", 7},
		{"llama-3.1-70b", "", "hello world", 3},
		// tiktoken names an encoding for gpt2 that its loader cannot
		// build: loading fails and the estimator is used.
		{"gpt2", "", "hello world", 3},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			c := CounterFor(tt.model)
			switch cc := c.(type) {
			case *bpeCounter:
				if cc.name != tt.encoding {
					t.Fatalf("CounterFor(%q) uses %s, want %q", tt.model, cc.name, tt.encoding)
				}
			case Estimator:
				if tt.encoding != "" {
					t.Fatalf("CounterFor(%q) fell back to the estimator, want %s", tt.model, tt.encoding)
				}
			default:
				t.Fatalf("CounterFor(%q) = %T", tt.model, c)
			}
			if got := c.Count(tt.text); got != tt.want {
				t.Fatalf("Count(%q) = %d, want %d", tt.text, got, tt.want)
			}
		})
	}
}

func TestCounterForLoadsOnce(t *testing.T) {
	a, b := CounterFor("gpt-4o"), CounterFor("gpt-4o-mini")
	if a != b {
		t.Fatalf("two counters for o200k_base: %p, %p", a, b)
	}
}

func TestEstimator(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"hello world", 3},              // 11 bytes: 3 > 2 words
		{"a b c d e", 5},                // 9 bytes: 3 < 5 words
		{"   ", 1},                      // whitespace is not free
		{"我们今天去公园", 6},                  // 7 × 3 bytes
		{strings.Repeat("x", 400), 100}, // one long word
	}
	for _, tt := range tests {
		if got := (Estimator{}).Count(tt.s); got != tt.want {
			t.Errorf("Estimator.Count(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

func TestCountMessages(t *testing.T) {
	o200k := CounterFor("gpt-4o")
	tests := []struct {
		name string
		c    Counter
		msgs []string
		want int
	}{
		{"none", o200k, nil, 0},
		// OpenAI reports 9 prompt tokens for one user message "hello
		// world" on gpt-4o: 2 + 4 + 3.
		{"one message", o200k, []string{"hello world"}, 2 + 4 + 3},
		{"system and user", o200k, []string{"hello world", "hello world"}, 2*(2+4) + 3},
		{"empty content still framed", o200k, []string{""}, 4 + 3},
		{"estimator", Estimator{}, []string{"abcdefgh", "x"}, (2 + 4) + (1 + 4) + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CountMessages(tt.c, tt.msgs); got != tt.want {
				t.Fatalf("CountMessages = %d, want %d", got, tt.want)
			}
			if len(tt.msgs) == 0 {
				return
			}
			// A first message counted once, its count kept.
			var once CountOnce
			for range 2 {
				if got := CountMessagesAfter(tt.c, once.Count(tt.c, tt.msgs[0]), tt.msgs[1:]); got != tt.want {
					t.Fatalf("CountMessagesAfter = %d, want %d", got, tt.want)
				}
			}
		})
	}
}

// Counters and cuts are shared by every request of a route; run them from
// many goroutines (go test -race) and compare with a sequential run.
func TestConcurrentUse(t *testing.T) {
	models := []string{"gpt-4o", "gpt-4", "o3-mini", "llama-3", "gpt-4.1-mini"}
	texts := []string{
		"hello world",
		strings.Repeat("The storm broke my window last night. ", 40),
		"我们今天去公园。天气很好！",
	}
	type key struct{ model, text string }
	wantCount := map[key]int{}
	wantCut := map[key]string{}
	for _, m := range models {
		c := CounterFor(m)
		for _, s := range texts {
			wantCount[key{m, s}] = c.Count(s)
			wantCut[key{m, s}] = Cut(s, 0.5, 0, KeepHeadTail, c)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 32; g++ {
		wg.Go(func() {
			for i := 0; i < 10; i++ {
				m := models[(g+i)%len(models)]
				s := texts[(g*7+i)%len(texts)]
				c := CounterFor(m)
				if got := c.Count(s); got != wantCount[key{m, s}] {
					errs <- fmt.Sprintf("%s: Count = %d, want %d", m, got, wantCount[key{m, s}])
				}
				if got := Cut(s, 0.5, 0, KeepHeadTail, c); got != wantCut[key{m, s}] {
					errs <- fmt.Sprintf("%s: Cut = %q, want %q", m, got, wantCut[key{m, s}])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestFirstLoadConcurrent(t *testing.T) {
	// cl100k may already be loaded by another test; p50k_base is not used
	// elsewhere, so this exercises concurrent first loads.
	var wg sync.WaitGroup
	got := make([]Counter, 16)
	for i := range got {
		wg.Go(func() {
			got[i] = CounterFor("text-davinci-003")
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("goroutine %d got a different counter", i)
		}
	}
	if _, ok := got[0].(*bpeCounter); !ok {
		t.Fatalf("text-davinci-003: %T, want a tiktoken counter", got[0])
	}
}

func TestSegmentEnd(t *testing.T) {
	long := func(s string, n int) string { return strings.Repeat(s, n) }
	tests := []struct {
		name string
		s    string
		want int
	}{
		{"empty", "", 0},
		{"prose is one segment", prose, len(prose)},
		{"letters at the limit", long("x", maxRunBytes), maxRunBytes},
		{"letters past the limit", long("x", maxRunBytes+10), maxRunBytes},
		{"spaces past the limit", "a" + long(" ", maxRunBytes+1) + "b", 1 + maxRunBytes},
		{"symbols past the limit", "ab " + long("!", 300), 3 + maxRunBytes},
		{"CJK runs counted in bytes", long("我", 100), 85 * 3},
		{"digits break letter runs", long("abc1", 200), 800},
		{"whitespace breaks runs", long("word ", 1000), 5000},
	}
	for _, tt := range tests {
		if got := segmentEnd(tt.s); got != tt.want {
			t.Errorf("%s: segmentEnd = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// Ordinary text is counted exactly as tiktoken counts it; only runs that
// would make the byte pair merge quadratic are sliced, and then stay close.
func TestBPECountExactAndBounded(t *testing.T) {
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		c := CounterFor(model).(*bpeCounter)
		for _, s := range []string{prose, text4K(), "我们今天去公园。天气很好！", "a\u0301b\u0302 c", "<|endoftext|> x"} {
			if got, want := c.Count(s), tiktokenCount(t, c.name, s); got != want {
				t.Errorf("%s: Count(%.20q…) = %d, tiktoken says %d", model, s, got, want)
			}
		}
		s := strings.Repeat("x", 4000)
		got, want := c.Count(s), tiktokenCount(t, c.name, s)
		if d := got - want; d < 0 || d > len(s)/maxRunBytes+1 {
			t.Errorf("%s: sliced count %d vs exact %d", model, got, want)
		}
	}
}

var tiktokens sync.Map // encoding name → *tiktoken.Tiktoken

// tiktokenCount is tiktoken-go's ordinary count of s, what rankCounter
// must agree with.
func tiktokenCount(t testing.TB, name, s string) int {
	enc, ok := tiktokens.Load(name)
	if !ok {
		e, err := tiktoken.GetEncoding(name)
		if err != nil {
			t.Fatalf("tiktoken %s: %v", name, err)
		}
		enc, _ = tiktokens.LoadOrStore(name, e)
	}
	return len(enc.(*tiktoken.Tiktoken).EncodeOrdinary(s))
}

// agreeTexts are texts whose pieces miss the rank tables in every way:
// prose, code, numbers, CJK, combining marks, emoji, contractions in
// both cases, runs of whitespace and newlines, and invalid UTF-8, which
// both read as U+FFFD.
var agreeTexts = []string{
	"", "a", " ", "\n", "hello world", prose,
	"I'M sure they'LL say it's 'quoted' and we'd've gone", "Don't DON'T don’t",
	"func main() {\n\tfmt.Println(\"x\") // ok\r\n}\n\n\n   \n",
	"1234567 89.01 -42 1e9 ٣٤٥ ½", "我们今天去公园。天气很好！ 日本語のテキスト", "a\u0301b\u0302 c Ωμέγα Привет мир",
	"👍🏽 family: 👨‍👩‍👧 flags 🇩🇪🇫🇷", "<|endoftext|> x <|endofprompt|>", "tab\tsep  two  spaces   three    ",
	"\xff\xfe bad \xc3 utf8 \xed\xa0\x80 end", "https://example.com/a/b?c=d&e=f#g ////\n//",
	strings.Repeat("word ", 60), strings.Repeat("ab", 30) + "\n\n", "ÀÉÎÕÜ àéîõü ßẞ ǅǈ",
}

func TestRankCounterAgrees(t *testing.T) {
	for name := range encodingFiles {
		c, err := newRankCounter(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range agreeTexts {
			if got, want := c.count(s), tiktokenCount(t, name, s); got != want {
				t.Errorf("%s: count(%q) = %d, tiktoken says %d", name, s, got, want)
			}
		}
	}
}

func FuzzRankCounterAgrees(f *testing.F) {
	for _, s := range agreeTexts {
		f.Add(s)
	}
	cs := []*bpeCounter{CounterFor("gpt-4o").(*bpeCounter), CounterFor("gpt-4").(*bpeCounter)}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 2000 {
			return // tiktoken-go is quadratic in a long piece
		}
		for _, c := range cs {
			if got, want := c.enc.count(s), tiktokenCount(t, c.name, s); got != want {
				t.Errorf("%s: count(%q) = %d, tiktoken says %d", c.name, s, got, want)
			}
		}
	})
}

// Before slicing, 100 KB of one letter took tens of seconds to count.
func TestCountPathologicalIsFast(t *testing.T) {
	c := CounterFor("gpt-4o")
	for _, s := range []string{
		strings.Repeat("x", 100_000),
		strings.Repeat(" ", 100_000) + "x",
		strings.Repeat("!", 100_000),
		strings.Repeat("我", 30_000),
	} {
		start := time.Now()
		c.Count(s)
		Cut(s, 0.5, 0, KeepHeadTail, c)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%.10q…: %v", s, d)
		}
	}
}

// An encoding's ranks are a few slices the collector need not scan, not a
// map of strings: tiktoken-go's tables for o200k_base (tiktoken.GetEncoding
// here) are 24 MB and 298,000 objects of live heap.
func TestRankTableIsCompact(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, err := newRankCounter(encO200k)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(c)
	objects, bytes := int64(after.HeapObjects)-int64(before.HeapObjects), int64(after.HeapAlloc)-int64(before.HeapAlloc)
	if objects > 5000 || bytes > 8<<20 {
		t.Fatalf("o200k_base's counter holds %d objects, %d bytes", objects, bytes)
	}
}

// segmentEnd's runs read the pre-tokenizers' classes: for every rune the
// same kinds as unicode's own predicates.
func TestRunKindsAgree(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		_, c, _ := classAt(string(r), 0)
		if !utf8.ValidRune(r) {
			continue // string(r) is U+FFFD
		}
		letter, space, symbol := runKinds(c)
		wantSpace := unicode.IsSpace(r)
		if letter != (unicode.IsLetter(r) || unicode.IsMark(r)) || space != wantSpace ||
			symbol != (!wantSpace && !unicode.IsLetter(r) && !unicode.IsNumber(r)) {
			t.Fatalf("%U: runKinds = %v %v %v", r, letter, space, symbol)
		}
	}
}
