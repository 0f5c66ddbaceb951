// Package sim is a simulated OpenAI-compatible upstream for contractd's
// demo, benchmarks and tests (command contractd-sim).
//
// # Which contract a request is for
//
// The simulator needs no contractd-specific header. It takes the schema
// from response_format.json_schema.schema when present, else from the
// system (or developer) message: contractd's templates print {{ schema }}
// as compact JSON, so a config contract whose compact schema the prompt
// contains is matched exactly, and otherwise the largest balanced JSON
// object in the prompt that looks like a schema is used. With a contractd
// config loaded (LoadCatalog, flag -config), the simulator also knows each
// contract's canonical label sets, evidence sources and question policies,
// and checks its own "valid" outputs with the contract exactly as contractd
// does. A request with no schema gets a plain chat reply (or a small JSON
// object when response_format asks for JSON).
//
// # What it answers
//
// Valid outputs are generated from the schema: types, const and enum,
// required members and some optional ones, string and array bounds,
// minimum/maximum, $ref into $defs, if/then/else (also inside allOf),
// contains, uniqueItems, pattern (examples copied from the prompt, else a
// string generated from the regexp) and the common formats. Labels come
// from the canonical sets; evidence snippets are runs of words copied
// exactly from the evidence source (for a source like /body, the field is
// found in the user message by reversing the route's user template);
// questions end with one question mark.
//
// # Failure modes
//
// In auto mode (the default) a request at a temperature above 0 fails with
// probability FailureRate, at temperature 0 with FailureRate*ColdFactor, so
// contractd's retry attempt (temperature 0) fails less often. The failure
// mode is drawn by weight among those that apply to the contract. Every
// draw comes from a PRNG seeded with the -seed flag and a hash of the
// request body: the same request at the same temperature always gets the
// same answer.
//
// A request can force a mode, in order of precedence, with:
//   - the body field "sim_mode" (contractd forwards unknown client fields
//     byte-for-byte, so a client can send it through the proxy);
//   - the header X-Sim-Mode (direct calls only: contractd does not forward it);
//   - a "+MODE" suffix on the model name (e.g. a route's model
//     "gpt-4o-mini+fence").
//
// Values: auto, valid, fence, prose, trailing_comma, extra_key,
// missing_required, wrong_label, bad_evidence, two_questions, truncated,
// refusal, empty, duplicate_key, http_429, http_500. "hot:MODE" applies MODE
// only at a temperature above 0 and answers validly at temperature 0: the
// failure contractd's default retry repairs. A forced mode the contract
// cannot show (bad_evidence without an evidence policy, two_questions
// without a question field, wrong_label without labels or enums) falls back
// to missing_required (else trailing_comma); the X-Sim-Mode response header
// names the mode applied.
package sim
