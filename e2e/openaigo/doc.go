// Package openaigo holds end-to-end tests of the built contractd binary
// driven by the official Go SDK, github.com/openai/openai-go/v3: chat
// completions (plain, json_schema, streaming), the Responses API (create,
// text.format, streaming events, store and previous_response_id), typed
// API errors, and the SDK's retries against 429 and 503 with Retry-After.
//
// It is a module of its own (like deploy/), so the product's module does
// not depend on the SDK; `make test` runs it. TestMain builds
// ../../cmd/contractd into a temporary directory; set CONTRACTD_E2E_BIN to
// test an already built binary instead.
package openaigo
