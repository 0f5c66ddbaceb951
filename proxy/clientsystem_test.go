package proxy

import "testing"

// TestClientSystemMessage: the 400 for a client's system message (or
// Responses instructions) on a route with client_system: reject names the
// setting that drops them instead; it said only that the prompt is
// registered in contractd. Status, type, code and param are unchanged.
func TestClientSystemMessage(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	const hint = " (the route's config can set client_system: drop to drop them instead)"
	for _, tc := range []struct{ name, path, body, param, want string }{
		{"chat system", "", `{"model":"free","messages":[{"role":"system","content":"x"},` + userHi + `]}`, "messages[0]",
			`route "free" does not accept system messages; its prompt is registered in contractd` + hint},
		{"chat developer", "", `{"model":"free","messages":[` + userHi + `,{"role":"developer","content":"x"}]}`, "messages[1]",
			`route "free" does not accept developer messages; its prompt is registered in contractd` + hint},
		{"responses instructions", respPath, `{"model":"free","input":"q","instructions":"be terse"}`, "instructions",
			`route "free" does not accept instructions; its prompt is registered in contractd` + hint},
		{"responses developer item", respPath, `{"model":"free","input":[{"role":"developer","content":"x"},{"role":"user","content":"q"}]}`, "input",
			`route "free" does not accept developer messages; its prompt is registered in contractd` + hint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.post(tc.path, tc.body)
			wantError(t, r, 400, "invalid_request_error", "client_system_not_allowed", &tc.param)
			if got, _ := r.errorObj()["message"].(string); got != tc.want {
				t.Errorf("message %q\nwant    %q", got, tc.want)
			}
		})
	}
}
