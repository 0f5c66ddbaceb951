// Package retry holds the parts of contractd's retry policy that must give
// the same answer every time: the attempt plan, offline token counting,
// shortening of client content, and the token budget.
//
// A contract failure is only worth retrying if the retry is reproducible:
// an operator replaying a request from its audit event must see the same
// attempts, the same shortened text and the same budget decision. So
// nothing here is random, reads the clock, or touches the network. Token
// counts come from the model's own BPE tokenizer when it is known (loaded
// from encodings compiled into the binary, never downloaded) and from a
// fixed estimate otherwise, because budget checks happen before an attempt
// is sent, when no upstream usage figure exists yet.
//
// Shortening cuts only on word boundaries and never exceeds its token
// target: a retry that sends a half-word, or more than the budget allowed,
// would turn a validation failure into a different, harder-to-explain one.
//
// The package is pure logic with no HTTP, so the proxy decides when to call
// it and this package decides only what the answer is.
package retry
