package policy

import (
	"testing"

	"github.com/contractd/contractd/contracts"
)

func TestNewQuestionsErrors(t *testing.T) {
	tests := []struct {
		path         string
		exactly, max *int
		want         string
	}{
		{"/q", nil, nil, `set exactly one of "exactly" and "max"`},
		{"/q", intp(1), intp(0), `set exactly one of "exactly" and "max"`},
		{"/q", intp(-1), nil, `"exactly" must be 0 or more, got -1`},
		{"/q", nil, intp(-2), `"max" must be 0 or more, got -2`},
		{"q", intp(1), nil, `path "q": must start with "/"`},
	}
	for _, tt := range tests {
		_, err := NewQuestions(tt.path, tt.exactly, tt.max)
		if err == nil || err.Error() != tt.want {
			t.Errorf("NewQuestions(%q) error = %v, want %q", tt.path, err, tt.want)
		}
	}
}

func TestQuestions(t *testing.T) {
	tests := []struct {
		name         string
		path         string
		exactly, max *int
		out          string
		want         []contracts.Violation
	}{
		{"exactly one", "/question", intp(1), nil, `{"question": "When did it break?"}`, nil},
		{"fullwidth counts", "/question", intp(1), nil, `{"question": "いつ壊れましたか？"}`, nil},
		{"two", "/question", intp(1), nil, `{"question": "When? Where?"}`,
			[]contracts.Violation{pv("/question", "questions", "has 2 question marks, expected exactly 1")}},
		{"mixed widths", "/question", intp(1), nil, `{"question": "When? どこ？"}`,
			[]contracts.Violation{pv("/question", "questions", "has 2 question marks, expected exactly 1")}},
		{"none", "/question", intp(1), nil, `{"question": "Tell me when."}`,
			[]contracts.Violation{pv("/question", "questions", "has 0 question marks, expected exactly 1")}},
		{"exactly two", "/question", intp(2), nil, `{"question": "When?"}`,
			[]contracts.Violation{pv("/question", "questions", "has 1 question mark, expected exactly 2")}},
		{"null with exactly", "/question", intp(1), nil, `{"question": null}`,
			[]contracts.Violation{pv("/question", "questions", "expected exactly 1 question mark, got null")}},
		{"null with max", "/question", nil, intp(0), `{"question": null}`, nil},
		{"missing with exactly", "/question", intp(1), nil, `{"other": 1}`,
			[]contracts.Violation{pv("", "questions", "nothing at /question, expected exactly 1 question mark there")}},
		{"missing nested", "/ask/question", intp(2), nil, `{"ask": {}}`,
			[]contracts.Violation{pv("/ask", "questions", "nothing at /ask/question, expected exactly 2 question marks there")}},
		{"missing under star", "/items/*/q", intp(1), nil, `{"items": []}`,
			[]contracts.Violation{pv("/items", "questions", "nothing at /items/*/q, expected exactly 1 question mark there")}},
		{"missing with exactly 0", "/question", intp(0), nil, `{}`, nil},
		{"missing with max", "/question", nil, intp(1), `{}`, nil},
		{"max zero ok", "/closure_text", nil, intp(0), `{"closure_text": "Thanks."}`, nil},
		{"max zero bad", "/closure_text", nil, intp(0), `{"closure_text": "Anything else？"}`,
			[]contracts.Violation{pv("/closure_text", "questions", "has 1 question mark, at most 0 allowed")}},
		{"each string alone", "/qs/*", intp(1), nil, `{"qs": ["a?", "b??", "c", "d？"]}`,
			[]contracts.Violation{
				pv("/qs/1", "questions", "has 2 question marks, expected exactly 1"),
				pv("/qs/2", "questions", "has 0 question marks, expected exactly 1"),
			}},
		{"star object", "/qs/*", nil, intp(1), `{"qs": {"x/y": "a??", "b": "ok?"}}`,
			[]contracts.Violation{pv("/qs/x~1y", "questions", "has 2 question marks, at most 1 allowed")}},
		{"one element missing is schema's job", "/items/*/q", intp(1), nil, `{"items": [{"q": "a?"}, {}]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewQuestions(tt.path, tt.exactly, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			vs, _ := p.Check(doc(t, tt.out), &contracts.Subject{})
			sameViolations(t, vs, tt.want)
		})
	}
}
