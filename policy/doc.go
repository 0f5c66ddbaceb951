// Package policy holds the checks a contract applies after its JSON Schema
// (a contract's `policies:`, each with its rule id): canonical labels, evidence
// snippets, question counts, forbidden patterns and system prompt leaks.
//
// Every policy is built once when the config loads, so constructors do all
// validation and compilation and return errors phrased for the person
// editing the config; Check only reads and is safe for concurrent use.
// Policies implement contracts.Policy and depend on package contracts, never
// the reverse, so the contract judge stays free of policy specifics.
//
// Paths are JSON Pointers in which a token that is exactly "*" matches every
// array index or object key (see Path). Messages never quote model output
// except label values, which are short by nature and are what the user needs
// to see; everything else might echo text the review must not carry.
package policy

// Policy rule ids. A forbidden pattern's rule is
// RuleForbiddenPrefix followed by the pattern's name.
const (
	RuleLabel            = "label"
	RuleEvidenceNotFound = "evidence_not_found"
	RuleQuestions        = "questions"
	RuleForbiddenPrefix  = "forbidden:"
	RulePromptLeak       = "prompt_leak"
)
