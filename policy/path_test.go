package policy

import (
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
		wild    bool
	}{
		{in: ""},
		{in: "/"},
		{in: "/a/b"},
		{in: "/a~0b/c~1d"},
		{in: "/intents/*/label", wild: true},
		{in: "/a*/b"}, // only a whole "*" token is a wildcard
		{in: "a/b", wantErr: `path "a/b": must start with "/"`},
		{in: "*", wantErr: `must start with "/"`},
		{in: "/a~2", wantErr: `bad escape in "a~2"`},
		{in: "/a~", wantErr: `bad escape`},
		{in: "/x/~", wantErr: `bad escape`},
	}
	for _, tt := range tests {
		p, err := ParsePath(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePath(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePath(%q): %v", tt.in, err)
			continue
		}
		if p.String() != tt.in {
			t.Errorf("String() = %q, want %q", p.String(), tt.in)
		}
		if p.HasWildcard() != tt.wild {
			t.Errorf("%q HasWildcard = %v", tt.in, p.HasWildcard())
		}
	}
}

func TestWalk(t *testing.T) {
	const d = `{
		"a": {"b": 1},
		"arr": [10, 20, 30],
		"objs": {"z": {"x": "Z"}, "a": {"x": "A"}, "m": {"y": "M"}},
		"intents": [{"label": "l0"}, {"label": "l1"}, {"nolabel": true}],
		"t~i/l": {"s/l": "esc"},
		"": {"": "empty"},
		"10": "ten", "9": "nine",
		"*": "star"
	}`
	v := doc(t, d)
	tests := []struct {
		path string
		want []string // "ptr=value"
	}{
		{"", []string{"=map"}},
		{"/a/b", []string{"/a/b=1"}},
		{"/a/c", nil},
		{"/arr/1", []string{"/arr/1=20"}},
		{"/arr/3", nil},
		{"/arr/01", nil},
		{"/arr/-", nil},
		{"/arr/x", nil},
		{"/arr/*", []string{"/arr/0=10", "/arr/1=20", "/arr/2=30"}},
		{"/objs/*/x", []string{"/objs/a/x=A", "/objs/z/x=Z"}},
		{"/intents/*/label", []string{"/intents/0/label=l0", "/intents/1/label=l1"}},
		{"/t~0i~1l/s~1l", []string{"/t~0i~1l/s~1l=esc"}},
		{"/*/s~1l", []string{"/t~0i~1l/s~1l=esc"}},
		{"//", []string{"//=empty"}},
		{"/10", []string{"/10=ten"}},
		{"/*/*", []string{"//=empty", "/a/b=1", "/arr/0=10", "/arr/1=20", "/arr/2=30",
			"/intents/0=map", "/intents/1=map", "/intents/2=map",
			"/objs/a=map", "/objs/m=map", "/objs/z=map", "/t~0i~1l/s~1l=esc"}},
		{"/a/b/c", nil}, // through a scalar
	}
	for _, tt := range tests {
		var got []string
		mustParse(t, tt.path).Walk(v, func(b []byte, x any) {
			ptr := string(b)
			s := ptr + "="
			switch y := x.(type) {
			case map[string]any:
				s += "map"
			case string:
				s += y
			default:
				s += strings.TrimSpace(strings.Trim(strings.ReplaceAll(stringify(x), "\n", ""), " "))
			}
			got = append(got, s)
		})
		if strings.Join(got, " | ") != strings.Join(tt.want, " | ") {
			t.Errorf("Walk(%q):\n got  %q\n want %q", tt.path, got, tt.want)
		}
	}
	// The top-level wildcard visits keys in byte order: "" "*" "10" "9" "a" …
	var keys []string
	mustParse(t, "/*").Walk(v, func(ptr []byte, _ any) { keys = append(keys, string(ptr)) })
	if strings.Join(keys, " ") != "/ /* /10 /9 /a /arr /intents /objs /t~0i~1l" {
		t.Errorf("top-level order: %q", keys)
	}
}

func stringify(v any) string {
	switch x := v.(type) {
	case interface{ String() string }:
		return x.String()
	}
	return "?"
}

func TestDeepestExisting(t *testing.T) {
	v := doc(t, `{"a": {"b": [{"c": 1}]}, "e": []}`)
	tests := []struct{ path, want string }{
		{"/q", ""},
		{"/a/q", "/a"},
		{"/a/b/0/q", "/a/b/0"},
		{"/a/b/5/q", "/a/b"},
		{"/e/*/q", "/e"},
		{"/a/*/q", "/a"},
		{"/*/q", ""},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.path).deepestExisting(v); got != tt.want {
			t.Errorf("deepestExisting(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
