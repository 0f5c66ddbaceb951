// Package config turns a contractd YAML file into an immutable Runtime:
// Resolve picks the file with viper (-c, CONTRACTD_CONFIG, the default);
// Parse (load.go) reads it once and a strict YAML node walk decodes it
// case-sensitively, naming file, line and key path on error; then
// Parsed.Compile (compile.go) validates and compiles in one pass: it
// checks every value and cross-reference, reporting each problem at its
// key (sorted by line, problems.go), and builds schemas, templates,
// policies and regexes once, so the request path only reads. Load is
// Parse then Compile.
//
// viper.Unmarshal is not used for decoding because viper lowercases every
// map key, which would corrupt inline schemas and example inputs
// (`Guardian-Report` and `guardian-report` must stay distinct).
package config
