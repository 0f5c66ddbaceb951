package proxy

import "testing"

// TestInputSchemaViolationRoot: the 400 input_schema_violation message
// writes the input's root as "root", as the 422's message does ("not_json
// at root"); it wrote "/", which is the JSON Pointer of the key "". Paths
// below the root stay pointers (an extra key is reported at its own).
func TestInputSchemaViolationRoot(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	const pre = "input does not match the route's input schema: "
	for _, tc := range []struct{ name, body, param, want string }{
		{"required missing", `{"model":"classify","messages":[{"role":"user","content":"{\"subject\":\"x\"}"}]}`, "messages",
			pre + `root: required property "body" is missing`},
		{"both missing", `{"model":"classify","contract_input":{}}`, "contract_input",
			pre + `root: required property "body" is missing; root: required property "subject" is missing`},
		{"below the root", `{"model":"classify","contract_input":{"subject":1,"body":"b"}}`, "contract_input",
			pre + `/subject: Value is integer but should be string`},
		{"extra key", `{"model":"classify","contract_input":{"subject":"a","body":"b","x":1}}`, "contract_input",
			pre + `/x: additional property "x" is not allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.post("", tc.body)
			wantError(t, r, 400, "invalid_request_error", CodeInputSchemaViolation, &tc.param)
			if got, _ := r.errorObj()["message"].(string); got != tc.want {
				t.Errorf("message %q\nwant    %q", got, tc.want)
			}
		})
	}
}
