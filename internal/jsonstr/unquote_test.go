package jsonstr

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// readString is the string literal a jsontext decoder reads from in (with
// or without AllowInvalidUTF8), or nil when in is not exactly one string.
func readString(in []byte, invalidUTF8 bool) []byte {
	dec := jsontext.NewDecoder(bytes.NewReader(in), jsontext.AllowInvalidUTF8(invalidUTF8))
	v, err := dec.ReadValue()
	if err != nil || v.Kind() != '"' {
		return nil
	}
	v = bytes.Clone(v) // the decoder's buffer is reused by the next read
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil
	}
	return v
}

// FuzzAppendUnquoteAgrees: on every string literal a decoder accepts,
// AppendUnquote appends what jsontext.AppendUnquote appends, and
// AppendUnquoteSame reports same exactly when Append writes the literal
// back byte for byte.
func FuzzAppendUnquoteAgrees(f *testing.F) {
	for _, s := range []string{`""`, `"plain"`, `"{\"a\":\"b\\\\c\"}"`, `"\b\f\n\r\t\/"`, `"\u00e9\u2028\u0000x"`,
		`"\ud83d\ude00"`, `"\uD83D\uDE00 tail"`, `"\ud83d"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"\ud83dx"`,
		"\"bad \xff utf8\"", "\"é日本\"", `"\u00"`, `"\u001b\u001B\u0008"`, `"\u2028 \u2029"`, "\"raw \u2028 \u2029\"", `"a\/b"`,
		`"\u0041\u00e9"`, `"\ufffd"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, invalid := range []bool{false, true} {
			q := readString(in, invalid)
			if q == nil {
				continue
			}
			want, _ := jsontext.AppendUnquote([]byte("x"), q)
			if got := AppendUnquote([]byte("x"), q); !bytes.Equal(got, want) {
				t.Fatalf("AppendUnquote(%q) = %q, jsontext %q", q, got, want)
			}
			got, same := AppendUnquoteSame([]byte("x"), q)
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendUnquoteSame(%q) = %q, jsontext %q", q, got, want)
			}
			if back := Append(nil, string(got[1:])); same != bytes.Equal(back, q) {
				t.Fatalf("AppendUnquoteSame(%q): same %v, but Append writes %q", q, same, back)
			}
		}
	})
}

func BenchmarkAppendUnquote(b *testing.B) {
	q := AppendJSON(nil)
	for _, tt := range []struct {
		name string
		fn   func([]byte, []byte) []byte
	}{
		{"jsonstr", AppendUnquote},
		{"jsontext", func(d, q []byte) []byte { d, _ = jsontext.AppendUnquote(d, q); return d }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(q)))
			var dst []byte
			for b.Loop() {
				dst = tt.fn(dst[:0], q)
			}
		})
	}
}

// AppendJSON is a quoted JSON object of about 1.5 KB, as a model's
// content arrives in a chat completion.
func AppendJSON(b []byte) []byte {
	obj := `{"category":"billing","priority":"high","summary":"Customer charged twice for the annual plan renewal; wants the duplicate refunded.",` +
		`"entities":[{"type":"order_id","value":"ORD-99812","start":91,"end":100},{"type":"amount","value":"EUR 129.00","start":40,"end":50},` +
		`{"type":"person","value":"Dana Whitfield","start":180,"end":194},{"type":"city","value":"Rotterdam","start":196,"end":205}],` +
		`"sentiment":{"label":"negative","score":-0.62},"flags":{"churn_risk":true,"needs_human":false,"language":"en"},` +
		`"actions":[{"kind":"refund","amount":129.0,"currency":"EUR","reason":"duplicate charge"},{"kind":"reply","template":"billing_refund_v2"}],` +
		`"quotes":["I was charged twice (EUR 129.00 each)","If this happens again I will cancel."],"notes":"tab\tnew\nline é ✓"}`
	return Append(b, obj+obj[:len(obj)/2])
}

func BenchmarkAppend(b *testing.B) {
	q := AppendJSON(nil)
	s, _ := jsontext.AppendUnquote(nil, q)
	for _, str := range []struct{ name, s string }{
		{"json", string(s)},
		{"prose", strings.Repeat("Hello, I was charged twice for the Pro annual plan renewal. ", 25)},
	} {
		b.Run(str.name, func(b *testing.B) {
			b.SetBytes(int64(len(str.s)))
			var dst []byte
			for b.Loop() {
				dst = Append(dst[:0], str.s)
			}
		})
	}
}
