// Package faults is contractd's fault-injection and hardening suite: the
// upstream misbehaves (5xx, 429, resets, garbage, unasked SSE, hangs, huge
// bodies), the client misbehaves (disconnects, slow headers and bodies,
// oversized headers and bodies, wrong keys, floods), and the config is
// reloaded under load. Each case asserts the documented status and error
// code a client sees,
// that nothing panics, and that no goroutine or file descriptor outlives
// the test.
//
// The pieces are the real ones: config.LoadBytes compiles the config,
// proxy.NewServer serves it, and hardServer serves it through
// proxy.NewHTTPServer as cmd/contractd/serve.go does (TestServeHardening
// runs the binary itself against the same limits).
package faults
