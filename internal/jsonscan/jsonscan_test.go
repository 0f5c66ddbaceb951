package jsonscan

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/contractd/contractd/internal/jsonstr"
)

// reference is jsontext's Decoder as the two walks configure it:
// duplicate names allowed, invalid UTF-8 as allowInvalid says.
func reference(b []byte, allowInvalid bool) *jsontext.Decoder {
	return jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(allowInvalid))
}

// checkWhole holds ReadValue followed by Done to jsontext reading one value
// and then nothing: the same verdict, and the same bytes when accepted.
func checkWhole(t *testing.T, b []byte, allowInvalid bool) bool {
	t.Helper()
	var s Scanner
	s.Reset(b, allowInvalid)
	got, err := s.ReadValue()
	ok := err == nil && s.Done()

	dec := reference(b, allowInvalid)
	want, werr := dec.ReadValue()
	want = bytes.Clone(want) // the decoder's buffer, reused by its next read
	wok := werr == nil
	if wok {
		_, end := dec.ReadToken()
		wok = end == io.EOF
	}
	if ok != wok {
		t.Fatalf("allowInvalidUTF8 %v, %.300q: accepted %v (err %v), jsontext %v (err %v)", allowInvalid, b, ok, err, wok, werr)
	}
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("allowInvalidUTF8 %v, %.300q: value %.300q, jsontext %.300q", allowInvalid, b, got, want)
	}
	return ok
}

// checkTokens walks b token by token with both, reading a container whole
// where the next bit of ops says so (the walks do both), and requires the
// same kind, bytes and success at every step.
func checkTokens(t *testing.T, b []byte, allowInvalid bool, ops uint64) {
	t.Helper()
	var s Scanner
	s.Reset(b, allowInvalid)
	dec := reference(b, allowInvalid)
	for step := 0; ; step++ {
		k := s.PeekKind()
		whole := k == '"' || k == '0' || (k == '{' || k == '[') && ops&(1<<(step%64)) != 0
		if whole {
			// A string is read with AppendString where another bit of
			// ops says so; what it does not read, ReadValue reads.
			var (
				got, val []byte
				err      error
				same, ap bool
			)
			if k == '"' && ops&(1<<((step+32)%64)) != 0 {
				val, got, same, ap = s.AppendString([]byte("x"))
			}
			if !ap {
				got, err = s.ReadValue()
			}
			wk := dec.PeekKind()
			want, werr := dec.ReadValue()
			if (err == nil) != (werr == nil) {
				t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: ReadValue (AppendString %v) err %v, jsontext %v", allowInvalid, b, step, ap, err, werr)
			}
			if err != nil {
				return
			}
			if ap {
				wantVal, _ := jsontext.AppendUnquote([]byte("x"), want)
				if !bytes.Equal(val, wantVal) {
					t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: AppendString %.300q, jsontext %.300q", allowInvalid, b, step, val, wantVal)
				}
				if back := jsonstr.Append(nil, string(val[1:])); same != bytes.Equal(back, want) {
					t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: AppendString same %v, but Append writes %.300q", allowInvalid, b, step, same, back)
				}
			}
			if !bytes.Equal(got, want) || Kind(wk) != k {
				t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: %c %.300q, jsontext %c %.300q", allowInvalid, b, step, k, got, wk, want)
			}
			if esc := bytes.IndexByte(got, '\\') >= 0; k == '"' && s.Escaped() != esc {
				t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: %.300q Escaped %v", allowInvalid, b, step, got, s.Escaped())
			}
		} else {
			got, err := s.ReadToken()
			wk := dec.PeekKind()
			tok, werr := dec.ReadToken()
			if (err == nil) != (werr == nil) {
				t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: ReadToken %c err %v, jsontext %c err %v", allowInvalid, b, step, got, err, tok.Kind(), werr)
			}
			if err != nil {
				return
			}
			if got != k || Kind(tok.Kind()) != got || Kind(wk) != k {
				t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: token %c (peeked %c), jsontext %c (peeked %c)", allowInvalid, b, step, got, k, tok.Kind(), wk)
			}
		}
		if got, want := s.InputOffset(), int(dec.InputOffset()); got != want {
			t.Fatalf("allowInvalidUTF8 %v, %.300q, step %d: offset %d, jsontext %d", allowInvalid, b, step, got, want)
		}
		if s.Depth() == 0 {
			// The one value is read: what follows must be nothing but
			// whitespace for both.
			_, end := dec.ReadToken()
			if s.Done() != (end == io.EOF) {
				t.Fatalf("allowInvalidUTF8 %v, %.300q: Done %v, jsontext's next token: %v", allowInvalid, b, s.Done(), end)
			}
			return
		}
	}
}

// FuzzScanAgrees holds the scanner to jsontext on any input, in both
// UTF-8 modes: the same verdict on one whole value, and the same tokens,
// values and offsets walking it.
func FuzzScanAgrees(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b, uint64(0))
		f.Add(b, uint64(0x5555555555555555))
	}
	f.Fuzz(func(t *testing.T, b []byte, ops uint64) {
		for _, allowInvalid := range []bool{false, true} {
			checkWhole(t, b, allowInvalid)
			checkTokens(t, b, allowInvalid, ops)
		}
	})
}

// seeds are the contracts' test data and the shared data's instances
// (every JSON file, every line of the JSONL samples), plus edge cases of
// the grammar.
func seeds(tb testing.TB) [][]byte {
	out := [][]byte{}
	for _, s := range edgeCases {
		out = append(out, []byte(s))
	}
	for _, dir := range []string{"../../contracts/testdata", "../../proxy/testdata", sharedData()} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if len(b) > 64<<10 {
				return nil // the fuzzer mutates small inputs better
			}
			if strings.HasSuffix(path, ".jsonl") {
				for line := range bytes.Lines(b) {
					out = append(out, line)
				}
				return nil
			}
			out = append(out, b)
			return nil
		})
		if err != nil {
			tb.Fatalf("seeds from %s: %v", dir, err)
		}
	}
	return out
}

// sharedData is where the real-world instances are: the shared data beside
// the repository (internal/jsonscan is two levels under its root), or, where
// only the JSON-Schema-Test-Suite is at hand, the copy that
// CONTRACTD_JSON_SCHEMA_TEST_SUITE names, as contracts' suite test finds it
// (a clone outside the workspace has no ../shared). Neither there fails the
// test: the seeds from real data are part of what it shows.
func sharedData() string {
	if d := os.Getenv("CONTRACTD_JSON_SCHEMA_TEST_SUITE"); d != "" {
		return d
	}
	return "../../../shared/data"
}

var edgeCases = []string{
	``, ` `, `{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `-`, `01`, `1.`, `1.5e`, `1e+5`, `1E-05`, `-1.25e+10`,
	`"a"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"\ud800\`, "\"\x7f\x1f\"",
	"\"\xff\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", `"\x"`, `"\/\b\f\n\r\t\"\\"`, `"\u12G4"`,
	`{"a":1,"a":2}`, `{"a":1,}`, `[1,]`, `[,1]`, `{"a" 1}`, `{"a":}`, `{1:2}`, `[1 2]`, `[1true]`, `[nul]`,
	`nullx`, `{} {}`, `{}}`, `[}`, `{]`, " \t\r\n{\"a\" : [ 1 , \"b\" , {} ] }\n", "\v{}", `{"a":[{"b":[null,false]}]}`,
	strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	`"` + strings.Repeat("abcdefgh", 9) + `\n` + strings.Repeat("é", 20) + `"`,
}

// TestEdgeCases runs the grammar's edge cases through both checks, and
// pins a few verdicts so that agreeing with jsontext cannot mean both are
// wrong the same way.
func TestEdgeCases(t *testing.T) {
	for _, c := range edgeCases {
		for _, allowInvalid := range []bool{false, true} {
			checkWhole(t, []byte(c), allowInvalid)
			checkTokens(t, []byte(c), allowInvalid, 0)
			checkTokens(t, []byte(c), allowInvalid, ^uint64(0))
		}
	}
	for _, c := range []struct {
		in          string
		strict, lax bool
	}{
		{`{"a":[1,-2.5e3,"x",true,false,null]}`, true, true},
		{`{"a":1,"a":2}`, true, true},
		{`"\ud800"`, false, true},
		{"\"\xff\"", false, true},
		{`[1,]`, false, false},
		{`01`, false, false},
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), true, true},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), false, false},
	} {
		for _, m := range []struct {
			allow, want bool
		}{{false, c.strict}, {true, c.lax}} {
			var s Scanner
			s.Reset([]byte(c.in), m.allow)
			_, err := s.ReadValue()
			if got := err == nil && s.Done(); got != m.want {
				t.Errorf("%.40q (allowInvalidUTF8 %v): accepted %v, want %v", c.in, m.allow, got, m.want)
			}
			var e *Error
			if err != nil && !errors.As(err, &e) {
				t.Errorf("%.40q: error %T, want *Error", c.in, err)
			}
		}
	}
}

// BenchmarkWalk compares reading every token of a chat completion whose
// content is a JSON object (the reply walk: one long string, dense with
// escapes) and of that object itself (the contract check's walk).
func BenchmarkWalk(b *testing.B) {
	obj := `{"order":{"id":"A-1","items":[` + strings.Repeat(`{"sku":"bcdefghij","qty":12345,"price":1.25,"tags":["x","y"]},`, 20) +
		`{"sku":"z","qty":1,"price":2,"tags":[]}],"paid":true,"note":null}}`
	quoted, _ := jsontext.AppendQuote(nil, obj)
	reply := `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":` + string(quoted) +
		`},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`
	for _, c := range []struct{ name, in string }{{"reply", reply}, {"output", obj}} {
		in := []byte(c.in)
		b.Run(c.name+"/jsonscan", func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			var s Scanner
			for b.Loop() {
				s.Reset(in, true)
				for s.Depth() > 0 || !s.Done() {
					k := s.PeekKind()
					var err error
					if k == '"' || k == '0' {
						_, err = s.ReadValue()
					} else {
						_, err = s.ReadToken()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(c.name+"/jsontext", func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			var dec jsontext.Decoder
			var buf bytes.Buffer
			for b.Loop() {
				buf = *bytes.NewBuffer(in)
				dec.Reset(&buf, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
				for {
					k := dec.PeekKind()
					var err error
					if k == '"' || k == '0' {
						_, err = dec.ReadValue()
					} else {
						_, err = dec.ReadToken()
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkAppendString unquotes a chat completion's content: a model's JSON
// output quoted in a string (short runs between escapes, a few long ones).
func BenchmarkAppendString(b *testing.B) {
	obj := `{"ticket_id":"TCK-20240917-0042","category":"billing","priority":2,"language":"en",` +
		`"sentiment":{"label":"negative","score":0.82},"customer":{"name":"Dana Whitfield","tier":"gold","account_age_days":1460,"region":"eu-west"},` +
		`"entities":[` + strings.Repeat(`{"type":"amount","text":"EUR 129.00","confidence":0.95},`, 5) + `{"type":"location","text":"Rotterdam","confidence":0.74}],` +
		`"actions":[` + strings.Repeat(`{"step":1,"owner":"billing","description":"Confirm the duplicate charge of EUR 129.00 on order ORD-99812 in the payment ledger.","due_hours":4},`, 3) +
		`{"step":4,"owner":"engineering","description":"Check the renewal job for retries that double-charge annual plans.","due_hours":72}],` +
		`"flags":{"refund_requested":true,"legal_threat":false,"churn_risk":true},` +
		`"summary":"A gold-tier customer in Rotterdam was charged twice (EUR 129.00 each) for the Pro annual plan renewal on 12 September under order ORD-99812, asks for the duplicate to be refunded within the week and says they will cancel the subscription if it happens again."}`
	quoted, _ := jsontext.AppendQuote(nil, obj)
	in := append(quoted, '}')
	b.SetBytes(int64(len(in)))
	var s Scanner
	var dst []byte
	for b.Loop() {
		s.Reset(in, true)
		out, _, _, ok := s.AppendString(dst[:0])
		if !ok || len(out) != len(obj) {
			b.Fatal("not read")
		}
		dst = out
	}
}
