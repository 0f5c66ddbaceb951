// Package config turns a contractd YAML file into an immutable Runtime:
// Resolve picks the file with viper (-c, CONTRACTD_CONFIG, the default);
// Load reads it once and a strict YAML node walk decodes it
// case-sensitively, naming file, line and key path on error;
// Validate checks every cross-reference, and Compile builds schemas,
// templates, policies and regexes once, so the request path only reads.
//
// viper.Unmarshal is not used for decoding because viper lowercases every
// map key, which would corrupt inline schemas and example inputs
// (`Guardian-Report` and `guardian-report` must stay distinct).
package config
