package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
)

func TestNewEvidenceErrors(t *testing.T) {
	tests := []struct{ path, source, want string }{
		{"ev", "", `path "ev": must start with "/"`},
		{"/ev", "body", `source: path "body": must start with "/"`},
		{"/ev", "/docs/*", `source "/docs/*": must name one input field, "*" is not allowed`},
		{"/ev", "/a~x", `source: path "/a~x": bad escape in "a~x" (write ~0 for "~" and ~1 for "/")`},
	}
	for _, tt := range tests {
		_, err := NewEvidence(tt.path, tt.source)
		if err == nil || err.Error() != tt.want {
			t.Errorf("NewEvidence(%q, %q) error = %v, want %q", tt.path, tt.source, err, tt.want)
		}
	}
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Offsets are in code points of the source: 😀 is 4 UTF-8 bytes and one
// code point, CJK characters 3 bytes each, and a combining accent is a code
// point of its own.
const evSource = "Hi 😀 窓が割れた. The cafe\u0301 window broke. abc"

func TestEvidence(t *testing.T) {
	input := map[string]any{
		"body": evSource,
		"meta": map[string]any{"a/b": "xyz abc", "t~": "tilde"},
		"n":    nil,
	}
	subj := &contracts.Subject{Input: input, LastUser: "the last user said abc", HasLastUser: true}
	ev := func(path string, start, end int, snippet string) contracts.Evidence {
		return contracts.Evidence{Path: path, Start: start, End: end, SHA256: hashOf(snippet)}
	}
	tests := []struct {
		name    string
		path    string
		source  string
		subject *contracts.Subject
		out     string
		wantV   []contracts.Violation
		wantE   []contracts.Evidence
	}{
		{"ascii known digest", "/e", "/body", subj, `{"e": "abc"}`, nil,
			[]contracts.Evidence{{Path: "/e", Start: 36, End: 39,
				SHA256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}}},
		{"emoji", "/e", "/body", subj, `{"e": "😀"}`, nil, []contracts.Evidence{ev("/e", 3, 4, "😀")}},
		{"cjk", "/e", "/body", subj, `{"e": "窓が割れた"}`, nil, []contracts.Evidence{ev("/e", 5, 10, "窓が割れた")}},
		{"combining", "/e", "/body", subj, `{"e": "cafe\u0301 window"}`, nil,
			[]contracts.Evidence{ev("/e", 16, 28, "cafe\u0301 window")}},
		{"first occurrence", "/e", "/body", subj, `{"e": "e"}`, nil, []contracts.Evidence{ev("/e", 14, 15, "e")}},
		{"precomposed is not combining", "/e", "/body", subj, `{"e": "café"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence snippet (4 characters) not found in input /body (exact, case-sensitive match)")}, nil},
		{"case-sensitive", "/e", "/body", subj, `{"e": "the cafe"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence snippet (8 characters) not found in input /body (exact, case-sensitive match)")}, nil},
		{"star mixed", "/intents/*/evidence_snippets/*", "/body", subj,
			`{"intents": [{"evidence_snippets": ["window broke", "nope", ""]}, {"evidence_snippets": [7, "Hi"]}]}`,
			[]contracts.Violation{
				pv("/intents/0/evidence_snippets/1", "evidence_not_found", "evidence snippet (4 characters) not found in input /body (exact, case-sensitive match)"),
				pv("/intents/0/evidence_snippets/2", "evidence_not_found", "evidence snippet is empty"),
				pv("/intents/1/evidence_snippets/0", "evidence_not_found", "evidence must be a string, got a number"),
			},
			[]contracts.Evidence{
				ev("/intents/0/evidence_snippets/0", 22, 34, "window broke"),
				ev("/intents/1/evidence_snippets/1", 0, 2, "Hi"),
			}},
		{"star object keys sorted", "/ev/*", "/body", subj, `{"ev": {"b": "Hi", "a/x": "abc"}}`, nil,
			[]contracts.Evidence{ev("/ev/a~1x", 36, 39, "abc"), ev("/ev/b", 0, 2, "Hi")}},
		{"escaped source pointer", "/e", "/meta/a~1b", subj, `{"e": "abc"}`, nil, []contracts.Evidence{ev("/e", 4, 7, "abc")}},
		{"escaped source tilde", "/e", "/meta/t~0", subj, `{"e": "tilde"}`, nil, []contracts.Evidence{ev("/e", 0, 5, "tilde")}},
		{"source missing", "/e", "/nope", subj, `{"e": "abc"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence source: the input has no /nope")}, nil},
		{"source null", "/e", "/n", subj, `{"e": "abc"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence source: input /n is null, not a string")}, nil},
		{"source object", "/e", "/meta", subj, `{"e": "abc"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence source: input /meta is an object, not a string")}, nil},
		{"no input at all", "/e", "/body", &contracts.Subject{}, `{"e": "abc"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence source: the input has no /body")}, nil},
		{"last user", "/e", "", subj, `{"e": "abc"}`, nil, []contracts.Evidence{ev("/e", 19, 22, "abc")}},
		{"last user not body", "/e", "", subj, `{"e": "window"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence snippet (6 characters) not found in the last user message (exact, case-sensitive match)")}, nil},
		{"no last user", "/e", "", &contracts.Subject{}, `{"e": "abc", "f": ""}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "no user message to find evidence in")}, nil},
		{"empty last user", "/e", "", &contracts.Subject{HasLastUser: true}, `{"e": "x"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "evidence snippet (1 character) not found in the last user message (exact, case-sensitive match)")}, nil},
		{"nil subject", "/e", "", nil, `{"e": "x"}`,
			[]contracts.Violation{pv("/e", "evidence_not_found", "no user message to find evidence in")}, nil},
		{"nothing at path", "/e", "/body", subj, `{}`, nil, nil},
		{"whole snippet is the source", "/e", "/body", subj, `{"e": "` + strings.ReplaceAll(evSource, "\u0301", `\u0301`) + `"}`, nil,
			[]contracts.Evidence{ev("/e", 0, 39, evSource)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewEvidence(tt.path, tt.source)
			if err != nil {
				t.Fatal(err)
			}
			vs, evs := p.Check(doc(t, tt.out), tt.subject)
			sameViolations(t, vs, tt.wantV)
			if (len(evs) != 0 || len(tt.wantE) != 0) && !reflect.DeepEqual(evs, tt.wantE) {
				t.Errorf("evidence:\n got  %+v\n want %+v", evs, tt.wantE)
			}
		})
	}
}

// The offsets must slice the snippet back out of the source when the source
// is taken as code points.
func TestEvidenceOffsetsRoundTrip(t *testing.T) {
	src := []rune(evSource)
	p, _ := NewEvidence("/e/*", "")
	out := map[string]any{"e": []any{"😀 窓", "e\u0301", "れた. The", "broke. abc", "i"}}
	vs, evs := p.Check(out, &contracts.Subject{LastUser: evSource, HasLastUser: true})
	if len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	for i, e := range evs {
		want := out["e"].([]any)[i].(string)
		if got := string(src[e.Start:e.End]); got != want {
			t.Errorf("%s: src[%d:%d] = %q, want %q", e.Path, e.Start, e.End, got, want)
		}
		if e.SHA256 != hashOf(want) {
			t.Errorf("%s: sha256 mismatch", e.Path)
		}
	}
}

func BenchmarkEvidence(b *testing.B) {
	body := benchText(20000, 9) + "窓が割れた 😀"
	var snippets []any
	for i := range 8 {
		r := []rune(body)
		start := 1000 + i*2000
		snippets = append(snippets, string(r[start:start+120]))
	}
	out := map[string]any{"intents": []any{
		map[string]any{"evidence_snippets": snippets[:4]},
		map[string]any{"evidence_snippets": snippets[4:]},
	}}
	p, _ := NewEvidence("/intents/*/evidence_snippets/*", "/body")
	subj := &contracts.Subject{Input: map[string]any{"body": body}}
	b.ReportAllocs()
	for b.Loop() {
		vs, evs := p.Check(out, subj)
		if len(vs) != 0 || len(evs) != 8 {
			b.Fatal(vs, evs)
		}
	}
}
