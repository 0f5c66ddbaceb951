package contracts

import (
	"encoding/json"
	"io"
	"testing"
)

const fuzzSchema = `{"type":"object","additionalProperties":false,"required":["verdict","reasons"],
 "properties":{"verdict":{"enum":["PASS","FAIL","RETRY"]},"reasons":{"type":"array","maxItems":3,"items":{"type":"string","maxLength":20}},
 "score":{"type":"number","minimum":0,"maximum":1},"meta":{"type":"object","additionalProperties":false,"properties":{"k":{"type":"integer"}}}},
 "if":{"properties":{"verdict":{"const":"PASS"}}},"then":{"properties":{"reasons":{"maxItems":0}}}}`

// FuzzCheck drives the whole check path in every mode: it never panics and
// never accepts an output that the schema, judged independently on what
// encoding/json decodes from the accepted bytes, rejects.
func FuzzCheck(f *testing.F) {
	s, err := CompileSchema([]byte(fuzzSchema))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"verdict":"PASS","reasons":[]}`,
		`{"verdict":"FAIL","reasons":["a","b"],"score":0.5,"meta":{"k":1}}`,
		"```json\n{\"verdict\":\"FAIL\",\"reasons\":[\"x\"]}\n```",
		`Sure! {"verdict":"RETRY","reasons":["x",],} hope that helps`,
		`{"text":"{\"verdict\":\"PASS\",\"reasons\":[]}"}`,
		`{"verdict":"PASS","verdict":"FAIL","reasons":[]}`,
		`{'verdict': 'FAIL', 'reasons': ['a']`,
		`[{"verdict":"PASS"}]`, ``, `   `, "\xff{}",
	} {
		for m := range 3 {
			f.Add(seed, uint8(m))
		}
	}
	modes := []Mode{ModeStrict, ModeLenient, ModeRepair}
	f.Fuzz(func(t *testing.T, out string, m uint8) {
		k := &Contract{Name: "f", Schema: s, Mode: modes[int(m)%3], Limits: Limits{MaxBytes: 1 << 16}}
		res := k.Check(out, nil)
		if !res.Valid {
			if len(res.Violations) == 0 {
				t.Fatal("invalid without violations")
			}
			return
		}
		var v any
		d := json.NewDecoder(bytesReader(res.JSON))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("accepted bytes do not decode: %v\n%q", err, res.JSON)
		}
		if _, ok := v.(map[string]any); !ok {
			t.Fatalf("accepted a non-object: %q", res.JSON)
		}
		if vs := s.Validate(v); len(vs) > 0 {
			t.Fatalf("accepted %q but the schema rejects it: %v", res.JSON, vs)
		}
	})
}

func bytesReader(b []byte) *bytesReaderT { return &bytesReaderT{b: b} }

type bytesReaderT struct{ b []byte }

func (r *bytesReaderT) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
