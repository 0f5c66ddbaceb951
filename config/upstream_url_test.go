package config

import (
	"net/http"
	"testing"
)

// TestChatURLMatchesNewRequest: the chat URL Compile parses once is the
// URL http.NewRequest makes of BaseURL + "/chat/completions" (an empty
// port dropped, a trailing slash trimmed), each call gets its own copy, and
// an Upstream built without Compile parses it on the spot.
func TestChatURLMatchesNewRequest(t *testing.T) {
	for _, base := range []string{
		"http://127.0.0.1:8080/v1",
		"https://api.example.com/v1/",
		"http://example.com:/v1",
		"http://[::1]:9000/openai/v1",
		"http://[::1]:/v1",
		"https://example.com/a%2Fb/v1?x=1",
	} {
		rt, err := LoadBytes("c.yaml", []byte("upstreams:\n  - name: up\n    base_url: \""+base+"\"\n"))
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		u := rt.Upstreams["up"]
		if u.chatURL == nil {
			t.Fatalf("%s: Compile parsed no chat URL", base)
		}
		want, err := http.NewRequest(http.MethodPost, u.BaseURL+"/chat/completions", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, up := range []*Upstream{u, {BaseURL: u.BaseURL}} {
			got, err := up.ChatURL()
			if err != nil {
				t.Fatalf("%s: %v", base, err)
			}
			if *got != *want.URL || got.String() != want.URL.String() {
				t.Errorf("%s: ChatURL %#v, NewRequest %#v", base, got, want.URL)
			}
			got.Host, got.Path = "changed", "/changed"
			again, _ := up.ChatURL()
			if *again != *want.URL {
				t.Errorf("%s: a caller's change to its copy reached the next call: %#v", base, again)
			}
		}
	}
	if _, err := (&Upstream{BaseURL: "http://bad host"}).ChatURL(); err == nil {
		t.Error("an unparsable BaseURL gave no error")
	}
}
