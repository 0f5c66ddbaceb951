package replay

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzParseLine: any bytes either parse into a record whose outputs carry
// a known old verdict, are ErrNotRecord, or are an error; never a panic.
// A parsed line must not alias the input (the reader reuses its buffer).
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"event":"request","time":"2026-11-20T10:00:00Z","request_id":"req_1","route":"r","outcome":"valid","attempts":[{"attempt":1,"finish_reason":"stop","violations":[],"output_sha256":"ab","output":"{\"a\":1}"}],"input":{"x":"y"}}`,
		`{"request_id":"req_2","route":"r","attempts":[{"attempt":1,"violations":[{"kind":"upstream","rule":"model_refusal"}],"output_sha256":"ab"}]}`,
		`{"id":"req_3","route":"r","contract":"c","input":"text","output":{"a":1},"resolved_at":null}`,
		`{"id":"req_4","route":"r","input":{},"output":"{\"a\":1}"}`,
		`{"event":"review_resolved","review_id":"x"}`,
		`{"request_id":"req_5","attempts":[{"output":null}]}`,
		`{"request_id":1}`, `[]`, `{`, ``, `{"a":1,"a":2}`, "{\"request_id\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		rec, err := ParseLine(in)
		if err != nil {
			if rec != nil {
				t.Fatal("a record with an error")
			}
			if !errors.Is(err, ErrNotRecord) && err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if len(rec.Outputs) == 0 && rec.NotReplayable == 0 {
			t.Fatal("a record with nothing to judge or count")
		}
		for _, s := range rec.Outputs {
			if s.Old != OldValid && s.Old != OldInvalid && s.Old != OldApproved {
				t.Fatalf("old verdict %q", s.Old)
			}
		}
		if len(rec.Outputs) > 0 && rec.Input == nil {
			t.Fatal("outputs without the input they answered")
		}
		input := string(rec.Input)
		for i := range in {
			in[i] = 'Z'
		}
		if string(rec.Input) != input || strings.Contains(string(rec.Input), "ZZZZ") && !bytes.Contains(b, []byte("ZZZZ")) {
			t.Fatal("the record aliases the line buffer")
		}
	})
}
