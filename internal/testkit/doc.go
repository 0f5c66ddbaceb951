// Package testkit is shared test support for contractd's test suites
// (proxy, telemetry, test/faults, e2e): a recording fake OpenAI-compatible
// upstream, chat completion body builders, an in-memory audit sink, a
// goroutine-safe log buffer, a runtime-from-YAML loader, the shared
// classifier prompt of the test configs (testdata/prompts at the module
// root), a builder and runner of the contractd binary (with the go
// command of the running toolchain), the process's CPU time for
// benchmarks (and per op), a counting ResponseWriter and an in-memory
// upstream response for handler benchmarks, a goroutine leak check,
// workers that repeat a call until stopped, a review webhook receiver
// that checks signatures and counts deliveries, and small request helpers.
//
// It lives in non-_test files only so that other packages' tests can
// import it. Only _test.go files may import it or its subpackages (golden:
// golden files, for packages testkit imports too); TestOnlyTestsImport
// keeps it that way. It must never import proxy or telemetry: proxy's own
// (package proxy) tests import it, and that would be an import cycle.
package testkit
