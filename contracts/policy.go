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

// PathPolicy is a Policy that reads the output only by walking one JSON
// Pointer path, as policy.Path.Walk does: tokens unescaped, wild[i] when
// token i is "*" (any member or element), a token naming an object member
// or an array index ("0", no leading zeros). Its Check may be handed,
// instead of the whole output, a copy holding every value that walk
// passes through and the whole value where it ends (arrays at their full
// length, elements it does not reach nil), which gives the same walk.
type PathPolicy interface {
	Policy
	OutputPath() (tokens []string, wild []bool)
}
