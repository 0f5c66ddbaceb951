package contracts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// wideObject is an object of n members "k0"…, with member i named dup
// when dup is not "": it crosses smallObject, where the decoder moves from
// comparing names to its map.
func wideObject(n, i int, dup string) string {
	var b strings.Builder
	b.WriteByte('{')
	for j := range n {
		if j > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("k%d", j)
		if j == i && dup != "" {
			name = dup
		}
		fmt.Fprintf(&b, `%q:[%d,"s%d",{"x":%d}]`, name, j, j, j)
	}
	b.WriteByte('}')
	return b.String()
}

// FuzzDecodeAgrees holds the output decoder to two references: what it
// accepts, encoding/json (UseNumber) decodes to the same value, and jsontext
// (which rejects repeated names and invalid UTF-8) accepts; what it rejects
// as a duplicate name, jsontext rejects too.
func FuzzDecodeAgrees(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":[1,"x",true,null,{"b":-0.5e3}],"c":{}}`, `{"a":1,"a":2}`,
		`{"a":{"b":1},"c":{"b":2}}`, `{"a":{"b":1,"b":2}}`, `[{"a":1},{"a":1}]`, `{"":1,"":2}`,
		`{"a\u0062":1,"ab":2}`, `{"a":"\ud83d\ude00"}`, `"s"`, `12`, `[]`, `{"a":1}x`,
		wideObject(15, 0, ""), wideObject(16, 0, ""), wideObject(17, 0, ""), wideObject(40, 0, ""),
		wideObject(20, 3, "k1"), wideObject(20, 16, "k2"), wideObject(20, 17, "k16"), wideObject(16, 15, "k0"),
		`{"o":` + wideObject(18, 0, "") + `,"p":` + wideObject(3, 2, "k0") + `}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		b := []byte(in)
		v, n, viol := decodeValue(b, 0, 2*DefaultMaxDepth)
		if viol != nil {
			if viol.Rule == RuleDuplicateKey && jsontext.Value(bytes.TrimSpace(b)).IsValid() {
				t.Fatalf("%q: duplicate_key, jsontext accepts it", in)
			}
			return
		}
		if !jsontext.Value(bytes.TrimSpace(b[:n])).IsValid() {
			t.Fatalf("%q: decoded, jsontext rejects it", in)
		}
		dec := json.NewDecoder(bytes.NewReader(b[:n]))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("%q: decoded, encoding/json: %v", in, err)
		}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("%q: decoded %#v, encoding/json %#v", in, v, want)
		}
	})
}

// TestDecodeWideObjects: a repeated name is found on either side of
// smallObject, and reported at its first repetition.
func TestDecodeWideObjects(t *testing.T) {
	for _, c := range []struct {
		in, want string // want: "" valid, else the duplicate message's suffix
	}{
		{wideObject(16, 0, ""), ""},
		{wideObject(17, 0, ""), ""},
		{wideObject(50, 0, ""), ""},
		{wideObject(16, 15, "k3"), `"k3" at /k3`},
		{wideObject(17, 16, "k3"), `"k3" at /k3`},
		{wideObject(30, 25, "k20"), `"k20" at /k20`},
		{`{"a":` + wideObject(20, 19, "k0") + `}`, `"k0" at /a/k0`},
	} {
		_, viol := decodeObject([]byte(c.in), 0)
		switch {
		case c.want == "" && viol != nil:
			t.Errorf("%.40s…: %v", c.in, viol)
		case c.want != "" && (viol == nil || viol.Rule != RuleDuplicateKey || !strings.HasSuffix(viol.Message, c.want)):
			t.Errorf("%.40s…: %+v, want duplicate_key ending %s", c.in, viol, c.want)
		}
	}
}
