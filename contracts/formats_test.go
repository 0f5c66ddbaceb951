package contracts

import "testing"

// Format checks beyond the validator's (formats.go); the official suite's
// optional format tests cover them further.
func TestFormatOverrides(t *testing.T) {
	tests := []struct {
		format, value string
		valid         bool
	}{
		{"hostname", "example.com", true},
		{"hostname", "example.", false},
		{"hostname", "xn--4gbwdl.xn--wgbh1c", true}, // مصر.مصر
		{"hostname", "xn--X", false},
		{"idn-hostname", "실례.테스트", true},
		{"idn-hostname", "실례。테스트", true}, // ideographic full stop separates labels
		{"idn-hostname", "a·b", false},   // MIDDLE DOT outside l·l
		{"idn-hostname", "l·l", true},
		{"idn-hostname", "-a", false},
		{"ipv4", "192.168.0.1", true},
		{"ipv4", "+1.2.3.4", false},
		{"uri", "http://[::1]/a", true},
		{"uri", "http:/[::1]", false},
		{"uri-reference", "/[::1]", false},
		{"uri-reference", "//a@b@example.com/", false},
		{"uri-reference", "//user@example.com/x?y#z", true},
		{"idn-email", "실례@실례.테스트", true},
		{"idn-email", "2962", false},
		{"idn-email", "user＠example.com", false},
		{"idn-email", `"a b"@example.com`, true},
		{"uri-template", "http://example.com/{term:1}/{+path*}{?q,lang}", true},
		{"uri-template", "{v:10000}", false},
		{"uri-template", "{a..b}", false},
		{"uri-template", "a b", false},
		{"uri-template", "foo}bar", false},
	}
	for _, tt := range tests {
		s := mustSchema(t, `{"type":"object","properties":{"v":{"type":"string","format":"`+tt.format+`"}}}`)
		v := map[string]any{"v": tt.value}
		if got := len(s.Validate(v)) == 0; got != tt.valid {
			t.Errorf("%s %q: valid=%v, want %v", tt.format, tt.value, got, tt.valid)
		}
		if s.fast == nil || s.fast.valid(v) != tt.valid {
			t.Errorf("%s %q: fast path disagrees", tt.format, tt.value)
		}
	}
}
