package config

import "testing"

// validate refuses a policy path that can only hold something other than a
// string: the labels there would fail every output that has the member,
// and evidence, questions and forbidden patterns would judge nothing.
func TestPolicyPathsMustReachAString(t *testing.T) {
	const k2 = "  - name: k2\n    schema: {type: object, properties: {tags: {type: array, items: {type: string}}, n: {type: integer}, s: {type: string}}}\n    policies: "
	for _, tc := range []struct{ policies, want string }{
		{"{labels: [{path: /tags, set: intent}]}", `contracts[1].policies.labels[0].path: path "/tags" cannot match a string the schema allows (policies judge strings; for an array's items use /tags/*)`},
		{"{evidence: [{path: /n}]}", `contracts[1].policies.evidence[0].path: path "/n" cannot match a string the schema allows`},
		{"{questions: [{path: /tags, max: 0}]}", `contracts[1].policies.questions[0].path: path "/tags" cannot match a string`},
		{"{forbidden: [{name: f, path: /n, pattern: x}]}", `contracts[1].policies.forbidden[0].path: path "/n" cannot match a string`},
	} {
		wantProblem(t, problemsOf(t, base+k2+tc.policies+"\n", nil), tc.want)
	}
	ok := base + k2 + "{labels: [{path: /tags/*, set: intent}], evidence: [{path: /s}], questions: [{path: /s, exactly: 1}], forbidden: [{name: f, path: /*, pattern: x}]}\n"
	if got := problemsOf(t, ok, nil); len(got) != 0 {
		t.Errorf("string paths refused: %q", got)
	}
}
