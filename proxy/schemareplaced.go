package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/contractd/contractd/config"
)

// Typed clients (zod with the official SDK, the AI SDK's generateObject,
// LangChain's withStructuredOutput) send their own JSON Schema as
// response_format / text.format. The route's contract replaces it;
// when the two differ the client's parse may fail after the
// tokens are spent, so the response says so in X-Contract-Schema-Replaced
// and the first such request per (route, client schema) logs a warning.
// Never a block: the route's contract is what is enforced either way.

// schemaAnnotations are the annotations converters add or drop (zod's
// $schema, titles, descriptions): they do not change what validates, so
// they do not make two schemas differ.
var schemaAnnotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// Keywords whose value is a map of names to subschemas, a list of
// subschemas, or one subschema; anything else is data (enum, const,
// required…) and compared as is.
var (
	schemaMapKeys  = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}
	schemaListKeys = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
	schemaOneKeys  = map[string]bool{"items": true, "additionalProperties": true, "not": true, "if": true, "then": true, "else": true,
		"contains": true, "propertyNames": true, "unevaluatedProperties": true, "unevaluatedItems": true, "additionalItems": true}
)

// normSchema drops annotations and orders what is a set (required, type
// lists) so that spellings of one schema compare equal. Key order is
// dropped by json.Marshal, which sorts map keys.
func normSchema(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		switch {
		case schemaAnnotations[k]:
			continue
		case schemaMapKeys[k]:
			if sub, ok := val.(map[string]any); ok {
				n := make(map[string]any, len(sub))
				for name, s := range sub {
					n[name] = normSchema(s)
				}
				val = n
			}
		case schemaListKeys[k] || k == "items":
			if list, ok := val.([]any); ok {
				n := make([]any, len(list))
				for i, s := range list {
					n[i] = normSchema(s)
				}
				val = n
			} else {
				val = normSchema(val)
			}
		case schemaOneKeys[k]:
			val = normSchema(val)
		case k == "required" || k == "type":
			if list, ok := val.([]any); ok && allStrings(list) {
				n := slices.Clone(list)
				slices.SortFunc(n, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
				val = n
			}
		}
		out[k] = val
	}
	return out
}

func allStrings(l []any) bool {
	for _, v := range l {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}

// schemaSum is the hash of a schema's normal form.
func schemaSum(raw []byte) [32]byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return sha256.Sum256(raw)
	}
	b, _ := json.Marshal(normSchema(v))
	return sha256.Sum256(b)
}

// clientSchema returns the schema of the client's response_format when it
// is a json_schema one (text.format arrives here mapped onto it), and
// whether it is.
func clientSchema(obj object) ([]byte, bool) {
	rf, ok := obj.get("response_format")
	if !ok || rf.Kind() != '{' {
		return nil, false
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(rf, &f) != nil || f.Type != "json_schema" {
		return nil, false
	}
	if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
		return []byte("null"), true // a json_schema format without a schema is not the route's
	}
	return f.JSONSchema.Schema, true
}

// maxSchemaNotes bounds the (route, client schema) pairs remembered for the
// once-only warning; past it the set starts again, so a flood of distinct
// schemas costs a warning each at most once per this many.
const maxSchemaNotes = 1024

// schemaNotes remembers which (route, client schema) pairs were warned
// about, and the routes' contract schema hashes by contract sha256.
type schemaNotes struct {
	mu     sync.Mutex
	warned map[string]bool
	routes map[string][32]byte
}

// routeSum is the normal-form hash of the route's contract schema, computed
// once per contract definition.
func (n *schemaNotes) routeSum(route *config.Route) [32]byte {
	k := route.Contract
	n.mu.Lock()
	defer n.mu.Unlock()
	if sum, ok := n.routes[k.SHA256]; ok {
		return sum
	}
	if n.routes == nil || len(n.routes) >= maxSchemaNotes {
		n.routes = map[string][32]byte{}
	}
	sum := schemaSum(k.Schema.JSON())
	n.routes[k.SHA256] = sum
	return sum
}

// first reports whether (route, sum) is seen for the first time.
func (n *schemaNotes) first(route string, sum [32]byte) bool {
	key := route + "\x00" + string(sum[:])
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.warned[key] {
		return false
	}
	if n.warned == nil || len(n.warned) >= maxSchemaNotes {
		n.warned = map[string]bool{}
	}
	n.warned[key] = true
	return true
}

// noteSchemaReplaced sets X-Contract-Schema-Replaced when the client's
// json_schema differs from the route's contract schema.
func (x *exchange) noteSchemaReplaced(h http.Header, route *config.Route, obj object) {
	raw, ok := clientSchema(obj)
	if !ok {
		return
	}
	notes := &x.s.schemaNotes
	sum := schemaSum(raw)
	if sum == notes.routeSum(route) {
		return
	}
	h.Set("X-Contract-Schema-Replaced", "true")
	if notes.first(route.Name, sum) {
		x.logger().Warn("the client's json_schema differs from the route's contract schema; the contract's is enforced",
			"route", route.Name, "contract", route.Contract.Name, "client_schema_sha256", hex.EncodeToString(sum[:]))
	}
}
