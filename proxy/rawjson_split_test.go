package proxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// splitCases are arrays of message-like objects, valid JSON, with what
// trips a scanner that does not decode: escaped quotes after runs of
// backslashes, brackets and braces inside strings, escaped names, spacing.
var splitCases = []string{
	`[]`,
	` [ ] `,
	`[{}]`,
	`[{"role":"user","content":"hi"}]`,
	`[{"role":"user","content":"a \"quoted\" ] } word"},{"role":"assistant","content":null}]`,
	`[{"role":"user","content":"ends in a backslash \\"}, {"role" : "user" , "content" : "\\\\\""}]`,
	"[\n\t{\"role\":\"user\",\r\n\"content\":[{\"type\":\"text\",\"text\":\"[{\\\"x\\\":1}]\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}}]}\n]",
	`[{"r\u006fle":"user","content":"\u00e9\u2028"},1,-2.5e+3,true,false,null,"s",[[]],{"a":{"b":[{}]}}]`,
	`[{"role":"user","content":"` + strings.Repeat(`x\"`, 100) + `"}]`,
}

// TestSplitMatchesParse: on valid JSON the splitters give exactly what the
// validating parsers give: the same elements, member names (unquoted and
// as sent) and values, aliasing the same bytes.
func TestSplitMatchesParse(t *testing.T) {
	for _, c := range splitCases {
		t.Run(c, func(t *testing.T) { checkSplit(t, []byte(c), true) })
	}
}

// TestSplitRejects: what cannot be split fails rather than splitting
// wrongly (invalid JSON is never given to them; these are the cases the
// scanner can see without decoding).
func TestSplitRejects(t *testing.T) {
	for _, c := range []string{``, ` `, `{}`, `[`, `[1`, `[1,`, `["a]`, `[{"a":1]`, `[1]x`, `[1 2]`, `[,]`} {
		if _, ok := splitArray(nil, []byte(c)); ok {
			t.Errorf("splitArray(%q) ok", c)
		}
	}
	for _, c := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1`, `{"a":1}x`, `{1:2}`, `{"a":1 "b":2}`, `{"a\"}`} {
		if _, ok := splitObject(nil, []byte(c)); ok {
			t.Errorf("splitObject(%q) ok", c)
		}
	}
}

// FuzzSplitValid: the splitters never panic, and on whatever the validating
// parsers accept they agree with them.
func FuzzSplitValid(f *testing.F) {
	for _, c := range splitCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"role":"user","content":"x"}`))
	f.Add([]byte(`{"a":"\\","b":[1,{"c":"}"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) { checkSplit(t, b, false) })
}

func checkSplit(t *testing.T, b []byte, mustBeValid bool) {
	t.Helper()
	fast, fastOK := splitArray(nil, b)
	slow, err := parseArray(b)
	if mustBeValid && err != nil {
		t.Fatalf("case is not valid JSON: %v", err)
	}
	if err == nil {
		if !fastOK || len(fast) != len(slow) {
			t.Fatalf("splitArray(%q) = %q, %v; parseArray %q", b, fast, fastOK, slow)
		}
		for i := range slow {
			if !sameSlice(fast[i], slow[i]) {
				t.Fatalf("element %d: %q vs %q", i, fast[i], slow[i])
			}
			if slow[i].Kind() == '{' {
				checkSplitObject(t, slow[i])
			}
		}
	}
	if _, err := appendObject(nil, b); err == nil {
		checkSplitObject(t, b)
	} else {
		_, _ = splitObject(nil, b) // no panic
	}
}

func checkSplitObject(t *testing.T, b []byte) {
	t.Helper()
	slow, err := appendObject(nil, b)
	if err != nil {
		t.Fatalf("appendObject(%q): %v", b, err)
	}
	fast, ok := splitObject(nil, b)
	if !ok || len(fast) != len(slow) {
		t.Fatalf("splitObject(%q) = %v, %v; appendObject %v", b, fast, ok, slow)
	}
	for i := range slow {
		if fast[i].Name != slow[i].Name || !sameSlice(fast[i].Value, slow[i].Value) || !sameSlice(fast[i].rawName, slow[i].rawName) {
			t.Fatalf("member %d: %q %q %q vs %q %q %q", i, fast[i].Name, fast[i].rawName, fast[i].Value, slow[i].Name, slow[i].rawName, slow[i].Value)
		}
	}
}

// sameSlice: equal bytes, at the same address, with no spare capacity.
func sameSlice(a, b []byte) bool {
	return bytes.Equal(a, b) && cap(a) == len(a) && cap(b) == len(b) &&
		(len(a) == 0 || &a[0] == &b[0])
}

// TestInputJSONInPlace: the last user message's input_sha256 bytes, read
// in place from the body when they already are its canonical quoting, are
// always what quoting its text gives (what input_sha256 hashed before).
func TestInputJSONInPlace(t *testing.T) {
	rt := loadRuntime(t, "http://127.0.0.1:1/v1", cfg{})
	route := rt.Routes["free"]
	for _, tc := range []struct {
		content string // JSON string as sent
		inPlace bool
	}{
		{`"plain text"`, true},
		{`"<b>&amp;</b> ünïcode 😀 \u007f"`, false},
		{"\"<b>&amp;</b> ünïcode 😀 \x7f\"", true},
		{`"escaped \"quote\" and \\ backslash"`, false},
		{`"\u00e9 spelled as an escape"`, false},
		{"\"line separator \u2028 sent raw\"", false},
		{"\"paragraph separator \u2029 sent raw\"", false},
		{"\"\xe2\x82\xac euro, and \xe2\x80\xa7 next to them\"", true},
		{`""`, true},
	} {
		t.Run(tc.content, func(t *testing.T) {
			body := []byte(`{"model":"free","messages":[{"role":"user","content":"first"},{"role":"user","content":` + tc.content + `}]}`)
			p, aerr := Prepare(route, body)
			if aerr != nil {
				t.Fatal(aerr.Message)
			}
			if want := quoteJSON(p.Subject.LastUser); !bytes.Equal(p.inputJSON(), want) {
				t.Fatalf("inputJSON %q, want %q", p.inputJSON(), want)
			}
			if got := inside(p.inputJSON(), body); got != tc.inPlace {
				t.Fatalf("read in place: %v, want %v", got, tc.inPlace)
			}
		})
	}
}

// FuzzQuotedAsIs: a valid JSON string without backslashes that quotedAsIs
// passes is byte for byte what quoteJSON makes of its text.
func FuzzQuotedAsIs(f *testing.F) {
	for _, s := range []string{"", "plain", "\u2028", "a\u2029b", "\xe2\x80", "€", "\x7f<>&", "\xe2\x80\xa8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := []byte(`"` + s + `"`)
		if strings.IndexByte(s, '\\') >= 0 || !jsontext.Value(q).IsValid() || !quotedAsIs([]byte(s)) {
			return
		}
		if want := quoteJSON(s); !bytes.Equal(q, want) {
			t.Fatalf("%q passes, but quoteJSON gives %q", q, want)
		}
	})
}
