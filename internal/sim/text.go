package sim

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// textCtx is what the generator writes text from: the request's messages
// and the evidence sources found in them.
type textCtx struct {
	system   string
	lastUser string
	// sources maps an evidence source (an input pointer such as "/body", or
	// "" for the last user message) to the text snippets must come from.
	sources map[string]string
	topics  []string
	paths   []string // file-path-looking tokens of the user message
	ids     []string // tokens with digits (policy numbers, plates…)
	sysToks []string // word tokens of the system prompt (pattern mining)
}

// banned are words the generator never takes from the user's message: they
// would trip the seed contracts' forbidden patterns (policy language, tool
// claims) or read as prompt/envelope talk.
var banned = map[string]bool{
	"policy": true, "policies": true, "guideline": true, "guidelines": true, "rule": true, "rules": true,
	"instruction": true, "instructions": true, "prompt": true, "system": true, "searched": true, "browsed": true,
	"checked": true, "sent": true, "emailed": true, "booked": true, "scheduled": true, "contacted": true,
	"executed": true, "queried": true, "allowed": true, "permitted": true, "programmed": true, "filter": true,
	"terms": true, "json": true, "schema": true, "googled": true, "outputplan": true,
}

var stopwords = map[string]bool{
	"this": true, "that": true, "with": true, "from": true, "have": true, "your": true, "about": true, "would": true,
	"there": true, "their": true, "what": true, "which": true, "when": true, "where": true, "will": true, "into": true,
	"been": true, "were": true, "they": true, "them": true, "than": true, "then": true, "just": true, "also": true,
	"please": true, "hello": true, "dear": true, "thanks": true, "thank": true, "could": true, "should": true,
	"does": true, "some": true, "more": true, "very": true, "only": true, "after": true, "before": true, "because": true,
	"while": true, "these": true, "those": true, "being": true, "each": true, "every": true, "other": true,
	"without": true, "within": true, "nobody": true, "madam": true, "request": false, "want": true, "need": true,
	"mode": true, "files": true, "output": true, "input": true, "none": true, "true": true, "false": true,
}

var (
	wordRE = regexp.MustCompile(`[\p{L}][\p{L}'-]*[\p{L}]`)
	pathRE = regexp.MustCompile(`[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+\.[A-Za-z]{1,5}`)
	idRE   = regexp.MustCompile(`[A-Z0-9][A-Za-z0-9-]*[0-9][A-Za-z0-9-]*`)
	sysRE  = regexp.MustCompile(`[A-Za-z0-9_.-]+`)
)

func newTextCtx(system, lastUser string) *textCtx {
	t := &textCtx{system: system, lastUser: lastUser, sources: map[string]string{"": lastUser}}
	seen := map[string]bool{}
	for _, w := range wordRE.FindAllString(lastUser, -1) {
		lw := strings.ToLower(w)
		if utf8.RuneCountInString(lw) < 4 || stopwords[lw] || banned[lw] || seen[lw] {
			continue
		}
		seen[lw] = true
		t.topics = append(t.topics, lw)
		if len(t.topics) == 16 {
			break
		}
	}
	if len(t.topics) < 2 {
		t.topics = append(t.topics, "account", "details", "settings")
	}
	t.paths = pathRE.FindAllString(lastUser, 8)
	for _, id := range idRE.FindAllString(lastUser, 16) {
		if len(id) >= 4 {
			t.ids = append(t.ids, id)
		}
	}
	seenTok := map[string]bool{}
	for _, w := range sysRE.FindAllString(system, -1) {
		w = strings.Trim(w, ".-")
		if w != "" && !seenTok[w] {
			seenTok[w] = true
			t.sysToks = append(t.sysToks, w)
		}
	}
	return t
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func (t *textCtx) topic(rng *rand.Rand) string { return pick(rng, t.topics) }

// two distinct topics.
func (t *textCtx) topic2(rng *rand.Rand) (string, string) {
	a := t.topic(rng)
	b := t.topic(rng)
	for i := 0; b == a && i < 4; i++ {
		b = t.topic(rng)
	}
	return a, b
}

func capFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

func fill(rng *rand.Rand, t *textCtx, tmpl string) string {
	a, b := t.topic2(rng)
	r := strings.NewReplacer("{a}", a, "{b}", b, "{A}", capFirst(a), "{B}", capFirst(b))
	return r.Replace(tmpl)
}

var sentenceTmpls = []string{
	"Based on what you described, the main point is {a}.",
	"The short answer: {a} can be handled without changing {b}.",
	"{A} and {b} are both covered by the information given.",
	"Start with {a}, then review {b} once the first step is done.",
	"Nothing in the message suggests a problem with {b}.",
	"The details about {a} are enough to continue.",
	"{A} is the part that matters most here.",
	"The information on {a} is consistent with {b}.",
	"Handle {a} first; {b} can wait until that is settled.",
}

var questionTmpls = []string{
	"Which {a} do you mean?",
	"Could you confirm the {a} you are referring to?",
	"Do you want the change to apply to {a} only?",
	"When did the problem with {a} start?",
	"Should {b} stay as it is?",
	"Which of the two options for {a} do you prefer?",
}

var closingTmpls = []string{
	"Glad that helped. Have a good day.",
	"Thanks for reaching out. Take care.",
	"You are all set. Goodbye.",
	"Happy to help with {a}. Have a great day.",
}

var refusalTmpls = []string{
	"Sorry, I can't help with that request.",
	"I can't assist with sharing that kind of information.",
	"That is something I can't provide here.",
	"I'm unable to help with {a} in this case.",
}

var nextStepTmpls = []string{
	"You could reach out to the support team directly.",
	"You may want to ask the person directly.",
	"Consider the official help page about {a}.",
}

var titleTmpls = []string{"Simplify {a} handling", "Extract {a} helper", "Rename {a} props", "Clean up {a}", "Split {a} from {b}"}

var phraseTmpls = []string{"{a}", "{a} {b}", "{a} and {b}", "{b} for {a}", "{a} details"}

func (t *textCtx) sentence(rng *rand.Rand) string { return fill(rng, t, pick(rng, sentenceTmpls)) }
func (t *textCtx) question(rng *rand.Rand) string { return fill(rng, t, pick(rng, questionTmpls)) }
func (t *textCtx) closing(rng *rand.Rand) string  { return fill(rng, t, pick(rng, closingTmpls)) }
func (t *textCtx) refusal(rng *rand.Rand) string  { return fill(rng, t, pick(rng, refusalTmpls)) }
func (t *textCtx) nextStep(rng *rand.Rand) string { return fill(rng, t, pick(rng, nextStepTmpls)) }
func (t *textCtx) title(rng *rand.Rand) string    { return fill(rng, t, pick(rng, titleTmpls)) }
func (t *textCtx) phrase(rng *rand.Rand) string   { return fill(rng, t, pick(rng, phraseTmpls)) }
func (t *textCtx) paragraph(rng *rand.Rand) string {
	a := t.sentence(rng)
	b := t.sentence(rng)
	for i := 0; b == a && i < 4; i++ {
		b = t.sentence(rng)
	}
	return a + " " + b
}

func (t *textCtx) markdown(rng *rand.Rand) string {
	a, b := t.topic2(rng)
	return fmt.Sprintf("## Summary\n\n- %s is handled first.\n- %s follows in a separate step.\n", capFirst(a), capFirst(b))
}

func snakeCase(s string) string {
	var sb strings.Builder
	under := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
			under = false
		} else if !under && sb.Len() > 0 {
			sb.WriteByte('_')
			under = true
		}
	}
	return strings.Trim(sb.String(), "_")
}

func (t *textCtx) filePath(rng *rand.Rand) string {
	if len(t.paths) > 0 {
		return pick(rng, t.paths)
	}
	return "src/components/" + capFirst(t.topic(rng)) + ".jsx"
}

func (t *textCtx) identifier(rng *rand.Rand) string {
	if len(t.ids) > 0 {
		return pick(rng, t.ids)
	}
	return fmt.Sprintf("ID-%04d", rng.IntN(10000))
}

// redact masks an identifier the way the triage prompt asks: keep the
// first 2 and last 4 characters.
func redact(s string) string {
	r := []rune(s)
	if len(r) <= 6 {
		return strings.Repeat("*", len(r))
	}
	return string(r[:2]) + strings.Repeat("*", len(r)-6) + string(r[len(r)-4:])
}

// snippet picks a run of 3 to 6 words (fewer in a short line) copied exactly from src, inside one
// line and never across the " … " that head_tail shortening inserts; at
// most maxRunes long (<= 0: no limit). ok is false when src has no words.
func snippet(rng *rand.Rand, src string, maxRunes int) (string, bool) {
	type seg struct {
		text  string
		words [][2]int
	}
	var segs []seg
	for _, line := range strings.Split(src, "\n") {
		for _, part := range strings.Split(line, "…") {
			var ws [][2]int
			start := -1
			for i, r := range part {
				if unicode.IsSpace(r) {
					if start >= 0 {
						ws = append(ws, [2]int{start, i})
						start = -1
					}
				} else if start < 0 {
					start = i
				}
			}
			if start >= 0 {
				ws = append(ws, [2]int{start, len(part)})
			}
			if len(ws) > 0 {
				segs = append(segs, seg{part, ws})
			}
		}
	}
	if len(segs) == 0 {
		return "", false
	}
	// Prefer segments with several words: they read like real evidence.
	var rich []seg
	for _, s := range segs {
		if len(s.words) >= 3 {
			rich = append(rich, s)
		}
	}
	if len(rich) > 0 {
		segs = rich
	}
	s := pick(rng, segs)
	n := 3 + rng.IntN(4)
	if n > len(s.words) {
		n = len(s.words)
	}
	i := rng.IntN(len(s.words) - n + 1)
	for ; n >= 1; n-- {
		out := s.text[s.words[i][0]:s.words[i+n-1][1]]
		out = strings.TrimRight(out, ",;:")
		if out == "" {
			continue
		}
		if maxRunes <= 0 || utf8.RuneCountInString(out) <= maxRunes {
			return out, true
		}
	}
	w := s.text[s.words[i][0]:s.words[i][1]]
	if maxRunes > 0 {
		w = string([]rune(w)[:min(maxRunes, utf8.RuneCountInString(w))])
	}
	return w, w != ""
}

// fitLength cuts s to at most max runes on a word boundary (or pads it
// with words to min runes).
func (t *textCtx) fitLength(rng *rand.Rand, s string, minR, maxR int) string {
	for minR > 0 && utf8.RuneCountInString(s) < minR {
		if s == "" {
			s = t.topic(rng)
		} else {
			s += " " + t.topic(rng)
		}
	}
	if maxR >= 0 && utf8.RuneCountInString(s) > maxR {
		r := []rune(s)[:maxR]
		cut := string(r)
		if i := strings.LastIndexByte(cut, ' '); i > 0 && utf8.RuneCountInString(cut[:i]) >= minR {
			cut = cut[:i]
		}
		s = strings.TrimRight(cut, " ")
		if utf8.RuneCountInString(s) < minR {
			s = string(r)
		}
	}
	return s
}
