package main

import "testing"

// TestReplyChecks: the load's reply checks accept a reply with the expected
// output and, on a contract route, a contract member of one attempt; they
// refuse another output, no contract member, or a retry.
func TestReplyChecks(t *testing.T) {
	const chat = `{"choices":[{"message":{"content":"out"}}]`
	const resp = `{"object":"response","output":[{"content":[{"type":"output_text","text":"out"}]}]`
	for _, tc := range []struct {
		name  string
		check func([]byte) error
		body  string
		ok    bool
	}{
		{"chat, no contract member wanted", checkContent("out", false), chat + `}`, true},
		{"chat, first attempt", checkContent("out", true), chat + `,"contract":{"attempts":1}}`, true},
		{"chat, retried", checkContent("out", true), chat + `,"contract":{"attempts":2}}`, false},
		{"chat, no contract member", checkContent("out", true), chat + `}`, false},
		{"chat, other output", checkContent("other", false), chat + `}`, false},
		{"chat, not JSON", checkContent("out", false), `{`, false},
		{"responses, first attempt", checkResponse("out"), resp + `,"contract":{"attempts":1}}`, true},
		{"responses, retried", checkResponse("out"), resp + `,"contract":{"attempts":2}}`, false},
		{"responses, no contract member", checkResponse("out"), resp + `}`, false},
		{"responses, other output", checkResponse("other"), resp + `,"contract":{"attempts":1}}`, false},
	} {
		if err := tc.check([]byte(tc.body)); (err == nil) != tc.ok {
			t.Errorf("%s: error %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
