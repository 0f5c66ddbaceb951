package policy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/contractd/contractd/contracts"
)

const leakPrompt = "You are a careful assistant for Acme Insurance. Classify the email into exactly one intent.\n" +
	"Allowed intents: claim_report, billing_question, complaint, other.\n" +
	"Reply with one JSON object that matches this schema and nothing else."

func TestPromptLeak(t *testing.T) {
	words := strings.Fields(leakPrompt)
	twelve := strings.Join(words[3:15], " ")
	eleven := strings.Join(words[3:14], " ")
	tests := []struct {
		name   string
		prompt string
		out    any
		want   []contracts.Violation
	}{
		{"clean", leakPrompt, doc(t, `{"a": "The window broke during the storm."}`), nil},
		{"twelve words", leakPrompt, map[string]any{"a": "Sure: " + twelve + " and more"},
			[]contracts.Violation{pv("/a", "prompt_leak", "contains 12 consecutive words of the system prompt")}},
		{"eleven words", leakPrompt, map[string]any{"a": eleven}, nil},
		{"case and spacing differ", leakPrompt, map[string]any{"a": strings.ToUpper(strings.Join(words[10:22], "\n\t  "))},
			[]contracts.Violation{pv("/a", "prompt_leak", "contains 12 consecutive words of the system prompt")}},
		{"punctuation is part of a word", leakPrompt,
			map[string]any{"a": strings.Replace(twelve, "Insurance.", "Insurance", 1)}, nil},
		{"split across strings", leakPrompt, map[string]any{"a": strings.Join(words[0:6], " "), "b": strings.Join(words[6:12], " ")}, nil},
		{"keys are not checked", leakPrompt, map[string]any{twelve: "x"}, nil},
		{"nested and escaped, sorted", leakPrompt,
			map[string]any{
				"z":   []any{"ok", map[string]any{"a/b": twelve}},
				"a~":  twelve,
				"n":   nil,
				"arr": []any{1, true, "x"},
			},
			[]contracts.Violation{
				pv("/a~0", "prompt_leak", "contains 12 consecutive words of the system prompt"),
				pv("/z/1/a~1b", "prompt_leak", "contains 12 consecutive words of the system prompt"),
			}},
		{"top-level string", leakPrompt, leakPrompt,
			[]contracts.Violation{pv("", "prompt_leak", "contains 12 consecutive words of the system prompt")}},
		{"no prompt skips", "", map[string]any{"a": twelve}, nil},
		{"whitespace prompt never leaks", " \n\t ", map[string]any{"a": "anything at all"}, nil},
		{"short prompt whole", "Answer in JSON only.", map[string]any{"a": "I must answer in json ONLY. ok"},
			[]contracts.Violation{pv("/a", "prompt_leak", "contains the whole system prompt")}},
		{"short prompt partial", "Answer in JSON only.", map[string]any{"a": "answer in json"}, nil},
		{"one-word prompt", "Classify", map[string]any{"a": "we classify things", "b": "classifying"},
			[]contracts.Violation{pv("/a", "prompt_leak", "contains the whole system prompt")}},
		{"unicode folding", "ΣΟΦΙΑ και Kelvin ſtrong", map[string]any{"a": "σοφιας", "b": "x σοφια ΚΑΙ kelvin strong y"},
			[]contracts.Violation{pv("/b", "prompt_leak", "contains the whole system prompt")}},
		{"repeated words in prompt", strings.Repeat("la ", 30), map[string]any{"a": strings.Repeat("LA ", 11), "b": strings.Repeat("La ", 12)},
			[]contracts.Violation{pv("/b", "prompt_leak", "contains 12 consecutive words of the system prompt")}},
		{"nil out", leakPrompt, nil, nil},
	}
	pol := NewPromptLeak()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, _ := pol.Check(tt.out, &contracts.Subject{SystemPrompt: tt.prompt})
			sameViolations(t, vs, tt.want)
		})
	}
	if vs, _ := pol.Check(map[string]any{"a": twelve}, nil); len(vs) != 0 {
		t.Errorf("nil subject: %v", vs)
	}
}

// Every window of the prompt leaks, and nothing else does, whatever the
// window's position (exercises the rolling hash and the ring buffer).
func TestPromptLeakIndexWindows(t *testing.T) {
	words := strings.Fields(leakPrompt)
	ix := NewPromptLeakIndex(leakPrompt)
	for i := 0; i+LeakWords <= len(words); i++ {
		s := "pre fix " + strings.Join(words[i:i+LeakWords], " ") + " post"
		if !ix.Leaks(s) {
			t.Errorf("window %d not detected", i)
		}
		shuffled := append([]string(nil), words[i:i+LeakWords]...)
		shuffled[0], shuffled[11] = shuffled[11], shuffled[0]
		if shuffled[0] != shuffled[11] && ix.Leaks(strings.Join(shuffled, " ")) {
			t.Errorf("window %d detected out of order", i)
		}
	}
}

// A hash hit is confirmed word by word, so a collision cannot reject output.
func TestPromptLeakConfirmsHits(t *testing.T) {
	ix := NewPromptLeakIndex(leakPrompt)
	s := strings.Join(strings.Fields(leakPrompt)[0:LeakWords], " ")
	if !ix.Leaks(s) {
		t.Fatal("want leak")
	}
	windows := int32(len(ix.words) - LeakWords + 1)
	for i := range ix.table { // point every hash at the wrong words
		if e := &ix.table[i]; e.j != 0 {
			e.j = e.j%windows + 1
		}
	}
	if ix.Leaks(s) {
		t.Fatal("unconfirmed hash hit reported as a leak")
	}
}

func TestPromptLeakCacheConcurrent(t *testing.T) {
	pol := NewPromptLeak()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				prompt := fmt.Sprintf("%s request %d", leakPrompt, (g*200+i)%150)
				out := map[string]any{"a": prompt}
				vs, _ := pol.Check(out, &contracts.Subject{SystemPrompt: prompt})
				if len(vs) != 1 {
					t.Errorf("got %v", vs)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := len(pol.(*PromptLeakPolicy).cache); n > promptLeakCacheSize {
		t.Errorf("cache grew to %d", n)
	}
}

// benchText returns about n bytes of word salad, the same every run.
func benchText(n int, seed uint64) string {
	vocab := strings.Fields("the claim policy window storm broke insurance email intent reply JSON schema " +
		"object exactly one careful assistant classify billing question complaint other allowed matches " +
		"nothing else customer damage report house roof water kitchen contract evidence snippet")
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(vocab[r.IntN(len(vocab))])
		b.WriteByte(' ')
	}
	return b.String()
}

func benchOutput() map[string]any {
	// ~1.5 KB spread over several strings, as a classification reply would be.
	return map[string]any{
		"primary_intent": "claim_report",
		"summary":        benchText(600, 2),
		"intents": []any{
			map[string]any{"label": "claim_report", "evidence_snippets": []any{benchText(200, 3), benchText(200, 4)}},
			map[string]any{"label": "complaint", "evidence_snippets": []any{benchText(200, 5), benchText(200, 6)}},
		},
		"question": "When did the storm break the window?",
	}
}

func BenchmarkPromptLeak(b *testing.B) {
	prompt := benchText(2048, 1)
	out := benchOutput()
	subj := &contracts.Subject{SystemPrompt: prompt}
	pol := NewPromptLeak()
	b.ReportAllocs()
	for b.Loop() {
		if vs, _ := pol.Check(out, subj); len(vs) != 0 {
			b.Fatal(vs)
		}
	}
}

// Cost when the prompt is new to the cache (e.g. it embeds the input).
func BenchmarkPromptLeakColdIndex(b *testing.B) {
	prompt := benchText(2048, 1)
	out := benchOutput()
	b.ReportAllocs()
	for b.Loop() {
		pol := NewPromptLeak()
		if vs, _ := pol.Check(out, &contracts.Subject{SystemPrompt: prompt}); len(vs) != 0 {
			b.Fatal(vs)
		}
	}
}

func BenchmarkPromptLeakIndexBuild(b *testing.B) {
	prompt := benchText(2048, 1)
	b.ReportAllocs()
	for b.Loop() {
		NewPromptLeakIndex(prompt)
	}
}
