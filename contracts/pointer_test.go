package contracts

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPointerTokens(t *testing.T) {
	for _, tt := range []struct {
		p       string
		want    []string
		segment string // the bad segment, when an error
		err     bool
	}{
		{p: "", want: nil},
		{p: "/", want: []string{""}},
		{p: "/a/b/0", want: []string{"a", "b", "0"}},
		{p: "/a~1b/~0c~01", want: []string{"a/b", "~c~1"}},
		{p: "//x", want: []string{"", "x"}},
		{p: "a/b", err: true},
		{p: "/ok/~2", err: true, segment: "~2"},
		{p: "/x~", err: true, segment: "x~"},
	} {
		got, err := PointerTokens(tt.p)
		var pe *PointerError
		switch {
		case tt.err && !errors.As(err, &pe):
			t.Errorf("%q: error %v, want a *PointerError", tt.p, err)
		case tt.err && pe.Segment != tt.segment:
			t.Errorf("%q: bad segment %q, want %q", tt.p, pe.Segment, tt.segment)
		case !tt.err && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("%q: %q, %v; want %q", tt.p, got, err, tt.want)
		}
	}
}

// FuzzPointerTokens: a pointer that parses is rebuilt exactly from its
// tokens, and escaped tokens always parse back to themselves.
func FuzzPointerTokens(f *testing.F) {
	for _, s := range []string{"", "/", "/a~1b/~0c", "/~2", "x", "/a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		toks, err := PointerTokens(p)
		if err == nil {
			var b strings.Builder
			for _, tok := range toks {
				b.WriteString("/" + EscapePointerToken(tok))
			}
			if b.String() != p {
				t.Fatalf("%q parsed to %q, rebuilt as %q", p, toks, b.String())
			}
		}
		back, err := PointerTokens("/" + EscapePointerToken(p))
		if err != nil || len(back) != 1 || back[0] != p {
			t.Fatalf("token %q escaped parses to %q, %v", p, back, err)
		}
	})
}

func TestPointerIndex(t *testing.T) {
	for _, tc := range []struct {
		tok string
		n   int
		ok  bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"10", 10, true}, {"999999999999999", 999999999999999, true},
		{"", 0, false}, {"-", 0, false}, {"01", 0, false}, {"00", 0, false}, {"1a", 0, false},
		{"+1", 0, false}, {" 1", 0, false}, {"1e3", 0, false}, {"1000000000000000", 0, false},
	} {
		n, ok := PointerIndex(tc.tok)
		if n != tc.n || ok != tc.ok {
			t.Errorf("PointerIndex(%q) = %d, %v; want %d, %v", tc.tok, n, ok, tc.n, tc.ok)
		}
	}
}
