package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// scanObjectCases are request-like objects, with what scanObject must
// leave to jsontext: duplicate names at any depth, escaped names (equal to
// another once unquoted), trailing data, invalid UTF-8, too many members.
var scanObjectCases = []string{
	vendorBody, classifyReq, freeReq,
	`{}`, ` { } `, `{"a":1} x`, `{"a":1}{}`, `{"a":1,"a":2}`, `[]`, `"x"`, `{"a":1,}`, `{"a" 1}`,
	`{"model":"free","messages":[{"role":"user","content":"hi","role":"x"}]}`,
	`{"model":"free","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}]}`,
	`{"\u006dodel":"free","model":"x"}`, `{"m":{"a":1,"\u0061":2}}`, `{"":1,"":2}`, `{"":1}`,
	"{\"model\":\"free\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
	"{\"model\" :\r\n\t\"free\" , \"n\":-0.0e-0,\"x\":[[],{},[{}],true,false,null]}",
	`{"a":{"b":{"c":{"d":[1,{"e":2,"f":3}]}}},"b":"é\u00e9"}`,
	manyMembers(40),
}

// manyMembers is an object of n distinct members.
func manyMembers(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"z":0}`)
	return b.String()
}

func sameMembers(a, b object) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Value, b[i].Value) || !bytes.Equal(a[i].rawName, b[i].rawName) {
			return false
		}
	}
	return true
}

// FuzzScanObjectAgrees: whatever scanObject accepts, jsontext's path
// accepts with the same members (names, values and quoted names as
// written); what it leaves is decided there.
func FuzzScanObjectAgrees(f *testing.F) {
	for _, s := range scanObjectCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := scanObject(nil, data)
		want, err := decodeObject(nil, data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("scanObject accepted %q, which jsontext refuses: %v", data, err)
		}
		if !sameMembers(got, want) {
			t.Fatalf("members of %q differ:\nscan:     %q\njsontext: %q", data, got, want)
		}
	})
}

// TestScanObjectTakesRequests: the request bodies clients send go through
// the fast path, and what it must leave goes to jsontext.
func TestScanObjectTakesRequests(t *testing.T) {
	for _, s := range []string{classifyReq, freeReq, `{}`, `{"":1}`, manyMembers(scanObjectMax - 2),
		`{"model":"free","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}]}`} {
		if _, ok := scanObject(nil, []byte(s)); !ok {
			t.Errorf("scanObject left %q to jsontext", s)
		}
	}
	for _, s := range []string{`{"a":1,"a":2}`, `{"m":[{"a":1,"a":2}]}`, `{"\u006dodel":"free"}`, `{"a":1} x`,
		manyMembers(scanObjectMax)} {
		if _, ok := scanObject(nil, []byte(s)); ok {
			t.Errorf("scanObject took %q", s)
		}
	}
}

func BenchmarkParseObject(b *testing.B) {
	long := `{"model":"free","temperature":0.2,"messages":[{"role":"system","content":"` + strings.Repeat(`Classify the ticket; answer JSON. `, 45) +
		`"},{"role":"user","content":"` + strings.Repeat(`My window broke during the storm. `, 15) + `"}],"stream":false}`
	for _, c := range []struct{ name, body string }{{"small", classifyReq}, {"2KB", long}} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseObject(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
