package contracts

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// benchCase is one line of testdata/jsonschemabench-sample.jsonl: a
// real-world schema with labelled instances (see ../shared/data/README.md).
type benchCase struct {
	ID     string          `json:"id"`
	Subset string          `json:"subset"`
	Schema json.RawMessage `json:"schema"`
	Tests  []suiteTest     `json:"tests"`
}

func loadBench(t testing.TB) []benchCase {
	f, err := os.Open("testdata/jsonschemabench-sample.jsonl")
	if err != nil {
		t.Fatalf("bench data: %v", err)
	}
	defer f.Close()
	var out []benchCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c benchCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("bench line: %v", err)
		}
		out = append(out, c)
	}
	return out
}

// TestJSONSchemaBench compiles every schema as a contract and judges every
// labelled instance through the real check path (strict extraction, then
// the schema). It reports agreement with the labels; the floors below are
// regression guards set under the measured values, not tuning targets.
// Run with -v to see the report (recorded in docs/schema-agreement.md).
func TestJSONSchemaBench(t *testing.T) {
	cases := loadBench(t)
	refused := map[string][]string{}
	var compiled, agree, disagree, nonObject, nonObjectOK, instances int
	var fpValid, fpInvalid []string // label valid but rejected / label invalid but accepted
	bySubset := map[string][2]int{}
	for _, c := range cases {
		s, err := CompileSchema(c.Schema)
		if err != nil {
			reason := classifyRefusal(err)
			refused[reason] = append(refused[reason], c.ID)
			continue
		}
		compiled++
		k := &Contract{Name: c.ID, Schema: s, Mode: ModeStrict, Limits: Limits{MaxBytes: 1 << 20}}
		for i, tc := range c.Tests {
			instances++
			res := k.Check(string(tc.Data), nil)
			trimmed := strings.TrimSpace(string(tc.Data))
			if !strings.HasPrefix(trimmed, "{") {
				// Contracts judge objects only: this tests top_level_not_object.
				nonObject++
				if !res.Valid && len(res.Violations) == 1 && res.Violations[0].Rule == RuleTopLevelNotObj {
					nonObjectOK++
				} else {
					t.Errorf("%s#%d: non-object instance gave %v", c.ID, i, res.Violations)
				}
				continue
			}
			sub := bySubset[c.Subset]
			if res.Valid == tc.Valid {
				agree++
				sub[0]++
			} else {
				disagree++
				sub[1]++
				desc := fmt.Sprintf("%s#%d (%s): %v", c.ID, i, tc.Description, rulesOf(res.Violations))
				if tc.Valid {
					fpValid = append(fpValid, desc)
				} else {
					fpInvalid = append(fpInvalid, desc)
				}
			}
			bySubset[c.Subset] = sub
		}
	}
	judged := agree + disagree
	rate := float64(agree) / float64(judged)
	t.Logf("schemas: %d, compiled: %d, refused: %d", len(cases), compiled, len(cases)-compiled)
	for _, r := range slices.Sorted(maps.Keys(refused)) {
		ids := refused[r]
		t.Logf("  refused (%s): %d, e.g. %s", r, len(ids), strings.Join(ids[:min(3, len(ids))], ", "))
	}
	t.Logf("instances: %d; non-object (top_level_not_object): %d/%d", instances, nonObjectOK, nonObject)
	t.Logf("object instances judged: %d, agree: %d (%.2f%%), disagree: %d", judged, agree, 100*rate, disagree)
	for _, s := range slices.Sorted(maps.Keys(bySubset)) {
		v := bySubset[s]
		t.Logf("  %-24s agree %4d disagree %3d", s, v[0], v[1])
	}
	slices.Sort(fpValid)
	slices.Sort(fpInvalid)
	t.Logf("labelled valid, rejected (%d):", len(fpValid))
	for _, d := range fpValid {
		t.Logf("  %s", d)
	}
	t.Logf("labelled invalid, accepted (%d):", len(fpInvalid))
	for _, d := range fpInvalid {
		t.Logf("  %s", d)
	}
	if compiled < len(cases)*95/100 {
		t.Errorf("only %d of %d schemas compiled", compiled, len(cases))
	}
	if rate < 0.97 {
		t.Errorf("agreement %.2f%% fell below the 97%% floor", 100*rate)
	}
}

func classifyRefusal(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "remote or unresolved $ref"):
		return "remote or unresolved $ref"
	case strings.Contains(msg, "regex") || strings.Contains(msg, "pattern"):
		return "regex Go cannot compile"
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

func rulesOf(vs []Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Path+" "+v.Rule)
	}
	return out
}
