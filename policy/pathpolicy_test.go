package policy

import (
	"fmt"
	"reflect"
	"regexp"
	"testing"

	"github.com/contractd/contractd/contracts"
)

// opaque hides a policy's OutputPath: a contract with it checks on the full
// path only, the decoded output whole.
type opaque struct{ contracts.Policy }

// TestPathPoliciesSeeTheSameOutput: the path policies, handed only what
// their paths reach by a strict contract's one-pass check, give the same
// violations and evidence as with the whole output.
func TestPathPoliciesSeeTheSameOutput(t *testing.T) {
	schema, err := contracts.CompileSchema([]byte(`{"type":"object","properties":{
		"items":{"type":"array","items":{"type":"object","properties":{"kind":{"type":"string"},"quote":{"type":"string"}}}},
		"summary":{"type":"string"},"meta":{"type":"object"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	two, one := 2, 1
	must := func(p contracts.Policy, err error) contracts.Policy {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pols := []contracts.Policy{
		must(NewLabels("/items/*/kind", "kinds", []string{"a", "b"})),
		must(NewLabels("/meta/*", "kinds", []string{"a", "b"})),
		must(NewForbidden("secret", "/summary", regexp.MustCompile(`(?i)secret`))),
		must(NewForbidden("secret_any", "/items/1/quote", regexp.MustCompile(`(?i)secret`))),
		must(NewEvidence("/items/*/quote", "")),
		must(NewQuestions("/summary", &one, nil)),
		must(NewQuestions("/items/0/missing", &two, nil)),
		must(NewQuestions("/meta/deep/x", nil, &one)),
	}
	subj := &contracts.Subject{LastUser: "the order arrived broken and the box was wet", HasLastUser: true}
	outputs := []string{
		`{"items":[{"kind":"a","quote":"the box was wet"},{"kind":"c","quote":"not there"}],"summary":"Broken? Yes.","meta":{"x":"a","y":1}}`,
		`{"items":[{"kind":"b","quote":"order arrived broken"}],"summary":"is it secret?","meta":{"deep":{"x":"??"}}}`,
		`{"items":[],"summary":"none","meta":{}}`,
		`{"items":[{"kind":1},{"quote":"wet"},{"kind":"a","quote":""}],"summary":"a?","meta":{"deep":[1]}}`,
		`{"items":{"0":{"kind":"a"}},"summary":"x","meta":{"a":{"b":"c"}}}`,
	}
	for i, pol := range pols {
		k := &contracts.Contract{Name: "paths", Schema: schema, Mode: contracts.ModeStrict, Policies: []contracts.Policy{pol}}
		full := &contracts.Contract{Name: "paths", Schema: schema, Mode: contracts.ModeStrict, Policies: []contracts.Policy{opaque{pol}}}
		for j, out := range outputs {
			got, want := k.Check(out, subj), full.Check(out, subj)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("policy %d, output %d: %s\n one pass: %+v\n full:     %+v", i, j, fmt.Sprint(pol), got, want)
			}
		}
	}
}
