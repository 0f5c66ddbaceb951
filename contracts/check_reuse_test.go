package contracts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
)

// sameAsStdlib is a test policy: the value a check hands policies must be
// what encoding/json (UseNumber) decodes from the accepted bytes, which the
// check passes in Subject.LastUser. A reused map, array, string or box that
// kept anything of an earlier output shows here as a violation.
type sameAsStdlib struct{}

func (sameAsStdlib) Check(out any, s *Subject) ([]Violation, []Evidence) {
	d := json.NewDecoder(bytes.NewReader([]byte(s.LastUser)))
	d.UseNumber()
	var want any
	if err := d.Decode(&want); err != nil {
		return []Violation{{Kind: KindPolicy, Rule: "stdlib", Message: err.Error()}}, nil
	}
	if !reflect.DeepEqual(out, want) {
		return []Violation{{Kind: KindPolicy, Rule: "stdlib", Message: fmt.Sprintf("decoded %#v, encoding/json %#v", out, want)}}, nil
	}
	return nil, nil
}

// reuseOutputs differ in shape, so that a reused scratch meets maps and
// arrays of other sizes, fewer or more of them, and longer strings.
var reuseOutputs = []string{
	`{"a":1,"b":[1,2,3],"c":{"d":"x","e":[]}}`,
	`{}`,
	`{"a":[{"x":1},{"y":[true,false,null]},{"z":"` + string(bytes.Repeat([]byte("long "), 300)) + `"}]}`,
	`{"b":"\u00e9\ud83d\ude00","c":{"d":{"e":{"f":{}}}},"g":[[],[[]],[[[1.5e3]]]]}`,
	wideObject(40, 0, ""),
	`{"only":"one"}`,
	wideObject(17, 0, ""),
	`{"a":[],"b":[1],"c":[1,2],"d":[1,2,3,4,5,6,7,8,9]}`,
}

// TestCheckReusesStorage checks outputs of different shapes one after the
// other on one contract in every mode, so each check decodes into what the
// previous valid one left (and a rejected one in between into fresh
// storage): the policy sees exactly encoding/json's value each time, and
// the results are those of a contract that never reused anything.
func TestCheckReusesStorage(t *testing.T) {
	s := mustSchema(t, `{"type":"object","maxProperties":30}`)
	for _, mode := range []Mode{ModeStrict, ModeLenient, ModeRepair} {
		k := &Contract{Name: "k", Schema: s, Mode: mode, Policies: []Policy{sameAsStdlib{}}}
		for round := range 3 {
			for i, out := range reuseOutputs {
				subj := &Subject{LastUser: out}
				got := k.Check(out, subj)
				fresh := (&Contract{Name: "k", Schema: s, Mode: mode, Policies: []Policy{sameAsStdlib{}}}).Check(out, subj)
				if !reflect.DeepEqual(got, fresh) {
					t.Fatalf("%s round %d output %d: %+v, a fresh contract %+v", mode, round, i, got.Violations, fresh.Violations)
				}
				wantValid := out != reuseOutputs[4] // 40 members, over maxProperties
				if got.Valid != wantValid {
					t.Fatalf("%s round %d output %d: valid %v, want %v: %+v", mode, round, i, got.Valid, wantValid, got.Violations)
				}
			}
		}
	}
}

// TestCheckReusesStorageConcurrently: checks running at once on one
// contract never share storage (run with -race).
func TestCheckReusesStorageConcurrently(t *testing.T) {
	k := &Contract{Name: "k", Schema: mustSchema(t, `{"type":"object"}`), Mode: ModeStrict, Policies: []Policy{sameAsStdlib{}}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				out := reuseOutputs[(g+i)%len(reuseOutputs)]
				if res := k.Check(out, &Subject{LastUser: out}); !res.Valid {
					t.Errorf("goroutine %d check %d: %+v", g, i, res.Violations)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzCheckReuse: whatever came before, a contract's verdict on an output
// is a fresh contract's, and the value its policies see is encoding/json's.
func FuzzCheckReuse(f *testing.F) {
	s, err := CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"array"}}}`))
	if err != nil {
		f.Fatal(err)
	}
	for _, out := range reuseOutputs {
		f.Add(out, reuseOutputs[0])
	}
	f.Add(`{"a":{}}`, `{"a":[1,{"b":"c"}]}`)
	f.Add(`{"a":[1],"a":[2]}`, `{"a":[]}`)
	shared := &Contract{Name: "f", Schema: s, Mode: ModeStrict, Policies: []Policy{sameAsStdlib{}}}
	f.Fuzz(func(t *testing.T, first, second string) {
		for _, out := range []string{first, second} {
			subj := &Subject{LastUser: out}
			got := shared.Check(out, subj)
			fresh := (&Contract{Name: "f", Schema: s, Mode: ModeStrict, Policies: []Policy{sameAsStdlib{}}}).Check(out, subj)
			if !reflect.DeepEqual(got, fresh) {
				t.Fatalf("%q after %q: %+v, a fresh contract %+v", out, first, got, fresh)
			}
			for _, v := range got.Violations {
				if v.Rule == "stdlib" {
					t.Fatalf("%q after %q: %s", out, first, v.Message)
				}
			}
		}
	})
}
