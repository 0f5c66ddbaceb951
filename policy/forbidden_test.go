package policy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
)

func TestNewForbiddenErrors(t *testing.T) {
	tests := []struct{ name, path, pattern, want string }{
		{"", "/x", "a", `name "": must match [A-Za-z0-9._-]+`},
		{"bad name", "/x", "a", `name "bad name": must match [A-Za-z0-9._-]+`},
		{"n", "x", "a", `path "x": must start with "/"`},
		{"n", "/x", "", `pattern for n: must not be empty`},
	}
	for _, tt := range tests {
		_, err := NewForbidden(tt.name, tt.path, regexp.MustCompile(tt.pattern))
		if err == nil || err.Error() != tt.want {
			t.Errorf("NewForbidden(%q, %q, %q) error = %v, want %q", tt.name, tt.path, tt.pattern, err, tt.want)
		}
	}
}

func TestForbidden(t *testing.T) {
	const pat = `(?i)\b(policy|guideline)s?\b`
	msg := "matches forbidden pattern policy_language"
	tests := []pathCase{
		{"clean", "/refusal_text", `{"refusal_text": "I cannot help with that."}`, nil},
		{"match", "/refusal_text", `{"refusal_text": "Our POLICY says no."}`,
			[]contracts.Violation{pv("/refusal_text", "forbidden:policy_language", msg)}},
		{"word boundary", "/refusal_text", `{"refusal_text": "policyholder"}`, nil},
		{"non-string passes", "/refusal_text", `{"refusal_text": null}`, nil},
		{"object at path is not text", "/refusal_text", `{"refusal_text": {"x": "policy"}}`, nil},
		{"star array", "/notes/*", `{"notes": ["fine", "see guideline 4", "ok", "policy"]}`,
			[]contracts.Violation{
				pv("/notes/1", "forbidden:policy_language", msg),
				pv("/notes/3", "forbidden:policy_language", msg),
			}},
		{"star object", "/m/*", `{"m": {"b~": "policy", "a/": "guidelines", "c": "no"}}`,
			[]contracts.Violation{
				pv("/m/a~1", "forbidden:policy_language", msg),
				pv("/m/b~0", "forbidden:policy_language", msg),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewForbidden("policy_language", tt.path, regexp.MustCompile(pat))
			if err != nil {
				t.Fatal(err)
			}
			vs, _ := p.Check(doc(t, tt.out), nil)
			sameViolations(t, vs, tt.want)
			for _, v := range vs {
				if strings.Contains(strings.ToLower(v.Message), "polic") && !strings.Contains(v.Message, "policy_language") {
					t.Errorf("message repeats matched text: %q", v.Message)
				}
			}
		})
	}
}
