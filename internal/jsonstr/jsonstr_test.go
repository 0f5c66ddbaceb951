package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// reference is what encoding/json writes for s with HTML escaping off.
func reference(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func FuzzAppendMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x1f\b\f\n\r\t", "\u2028\u2029", "bad \xff utf8 \xc3", "<a&b>", "é日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Append([]byte("x"), s), append([]byte("x"), reference(s)...); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}
