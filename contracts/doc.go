// Package contracts judges a model's output against a compiled contract:
// extraction (strict, lenient, repair), JSON Schema validation and the
// policies beyond the schema, producing stable, sorted violation lists. It
// also holds the prompt registry's templates.
//
// Everything here is compiled once at config load and is safe for concurrent
// use afterwards: the request path only reads.
package contracts
