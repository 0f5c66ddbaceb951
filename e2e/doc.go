// Package e2e holds end-to-end tests of the built contractd binary: the
// daemon is started as a separate process on loopback ports, in front of a
// scripted fake upstream that runs inside the test process, and is driven
// with real clients (go-openai here, the official openai npm package in
// e2e/node, run by scripts/e2e-node.sh).
//
// TestMain builds ./cmd/contractd into a temporary directory, so
// `go test ./e2e/` works on a fresh clone; set CONTRACTD_E2E_BIN to test an
// already built binary instead.
package e2e
