package policy

import (
	"strings"
	"testing"

	"github.com/contractd/contractd/contracts"
)

func TestNewLabelsErrors(t *testing.T) {
	tests := []struct {
		path, set string
		values    []string
		want      string
	}{
		{"x", "intent", []string{"a"}, `path "x": must start with "/"`},
		{"/x", "", []string{"a"}, "label set name must not be empty"},
		{"/x", "intent", nil, `label set "intent" has no values`},
	}
	for _, tt := range tests {
		_, err := NewLabels(tt.path, tt.set, tt.values)
		if err == nil || err.Error() != tt.want {
			t.Errorf("NewLabels(%q, %q, %q) error = %v, want %q", tt.path, tt.set, tt.values, err, tt.want)
		}
	}
}

func TestLabels(t *testing.T) {
	set := []string{"claim_report", "billing_question", "complaint", "other", "a/b~c"}
	tests := []pathCase{
		{"valid", "/primary_intent", `{"primary_intent": "complaint"}`, nil},
		{"absent is not ours", "/primary_intent", `{}`, nil},
		{"unknown", "/primary_intent", `{"primary_intent": "Complaint"}`,
			[]contracts.Violation{pv("/primary_intent", "label", `value is not a label in set "intent"`)}},
		{"non-string", "/primary_intent", `{"primary_intent": 3}`,
			[]contracts.Violation{pv("/primary_intent", "label", `expected a label from set "intent", got a number`)}},
		{"null", "/primary_intent", `{"primary_intent": null}`,
			[]contracts.Violation{pv("/primary_intent", "label", `expected a label from set "intent", got null`)}},
		{"star on array", "/intents/*/label",
			`{"intents": [{"label": "other"}, {"label": "nope"}, {"x": 1}, {"label": "complaint"}, {"label": ["other"]}]}`,
			[]contracts.Violation{
				pv("/intents/1/label", "label", `value is not a label in set "intent"`),
				pv("/intents/4/label", "label", `expected a label from set "intent", got an array`),
			}},
		{"star on object, escaped keys", "/by_key/*",
			`{"by_key": {"z": "other", "a/b": "bad", "t~x": "a/b~c", "m": "worse"}}`,
			[]contracts.Violation{
				pv("/by_key/a~1b", "label", `value is not a label in set "intent"`),
				pv("/by_key/m", "label", `value is not a label in set "intent"`),
			}},
		{"escaped pointer", "/a~1b/c~0d", `{"a/b": {"c~d": "x"}}`,
			[]contracts.Violation{pv("/a~1b/c~0d", "label", `value is not a label in set "intent"`)}},
		{"long value never quoted", "/l", `{"l": "` + strings.Repeat("é", 100) + `"}`,
			[]contracts.Violation{pv("/l", "label", `value is not a label in set "intent"`)}},
		{"numeric order", "/l/*", `{"l": ["x", "other", "other", "other", "other", "other", "other", "other", "other", "other", "y"]}`,
			[]contracts.Violation{
				pv("/l/0", "label", `value is not a label in set "intent"`),
				pv("/l/10", "label", `value is not a label in set "intent"`),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewLabels(tt.path, "intent", set)
			if err != nil {
				t.Fatal(err)
			}
			vs, ev := p.Check(doc(t, tt.out), &contracts.Subject{})
			if ev != nil {
				t.Errorf("labels returned evidence %v", ev)
			}
			sameViolations(t, vs, tt.want)
		})
	}
}
