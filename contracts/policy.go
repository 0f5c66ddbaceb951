package contracts

// Subject is what a policy may look at besides the output itself.
type Subject struct {
	// Input is the client's input object (decoded JSON: map[string]any,
	// []any, string, bool, nil, json.Number), or nil when the prompt has no
	// input schema.
	Input any
	// LastUser is the last user message's content as the client sent it,
	// before any shortening; HasLastUser tells whether there was one.
	LastUser    string
	HasLastUser bool
	// SystemPrompt is the rendered system prompt sent upstream. Empty skips
	// prompt_leak (offline check without a route).
	SystemPrompt string
}

// Policy is one check beyond the schema. Check must be safe for concurrent
// use and must not retain or modify out. Evidence records are returned for
// accepted snippets so the caller can report offsets.
type Policy interface {
	Check(out any, s *Subject) ([]Violation, []Evidence)
}
