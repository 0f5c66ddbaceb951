package policy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/contractd/contractd/contracts"
)

// doc decodes JSON the way the proxy does (numbers as json.Number).
func doc(tb testing.TB, s string) any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatalf("bad test JSON %q: %v", s, err)
	}
	return v
}

func mustParse(tb testing.TB, s string) Path {
	tb.Helper()
	p, err := ParsePath(s)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func pv(path, rule, msg string) contracts.Violation {
	return contracts.Violation{Kind: contracts.KindPolicy, Path: path, Rule: rule, Message: msg}
}

func sameViolations(t *testing.T, got, want []contracts.Violation) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("violations:\n got  %#v\n want %#v", got, want)
	}
}

func intp(n int) *int { return &n }

// pathCase is a case of a policy that checks the values at a path: the
// output, and the violations the policy finds in it.
type pathCase struct {
	name string
	path string
	out  string
	want []contracts.Violation
}
