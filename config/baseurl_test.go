package config

import (
	"strings"
	"testing"
)

// base_url problems name what is wrong without repeating a password the
// URL may carry: validate prints them, serve logs them.
func TestBaseURLProblems(t *testing.T) {
	const pw = "pw-not-echoed"
	withURL := func(u string) string {
		return strings.Replace(base, `base_url: "http://127.0.0.1:1/v1"`, `base_url: "`+u+`"`, 1)
	}
	for _, tc := range []struct{ name, url, want string }{
		{"empty", "", "upstreams[0].base_url: base_url is required"},
		{"other scheme", "ftp://u:" + pw + "@h/v1", `upstreams[0].base_url: base_url must be an http(s) URL, got "ftp://u:xxxxx@h/v1"`},
		{"no host", "http:///v1", `upstreams[0].base_url: base_url must be an http(s) URL, got "http:///v1"`},
		{"unparsable", "http://u:" + pw + "@h:bad port/v1", "upstreams[0].base_url: base_url must be an http(s) URL"},
		{"credentials", "https://u:" + pw + "@h/v1", "upstreams[0].base_url: base_url must not carry credentials; use api_key_env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOf(t, withURL(tc.url), nil)
			wantProblem(t, got, tc.want)
			wantNoSecret(t, got, pw)
		})
	}
}
