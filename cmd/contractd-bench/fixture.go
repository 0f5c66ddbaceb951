package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The benchmark contract: a support-ticket triage whose output is a ~1.5 KB
// nested object. Every object is closed (additionalProperties: false), with
// enums, numeric bounds, string lengths, a pattern, array bounds, and a
// labels policy on two paths, so validation does real work on each reply.

var categories = []string{"billing", "technical", "account", "shipping", "other"}
var entityTypes = []string{"order", "amount", "date", "product", "person", "location"}

const benchSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["ticket_id", "category", "priority", "language", "sentiment", "customer", "entities", "actions", "flags", "summary"],
  "properties": {
    "ticket_id": {"type": "string", "pattern": "^TCK-[0-9]{8}-[0-9]{4}$"},
    "category": {"type": "string", "enum": ["billing", "technical", "account", "shipping", "other"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
    "language": {"type": "string", "enum": ["en", "de", "fr", "es", "it", "nl"]},
    "sentiment": {
      "type": "object", "additionalProperties": false, "required": ["label", "score"],
      "properties": {
        "label": {"type": "string", "enum": ["positive", "neutral", "negative"]},
        "score": {"type": "number", "minimum": 0, "maximum": 1}
      }
    },
    "customer": {
      "type": "object", "additionalProperties": false, "required": ["name", "tier", "account_age_days", "region"],
      "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 120},
        "tier": {"type": "string", "enum": ["free", "silver", "gold", "platinum"]},
        "account_age_days": {"type": "integer", "minimum": 0, "maximum": 36500},
        "region": {"type": "string", "enum": ["eu-west", "eu-central", "us-east", "us-west", "apac"]}
      }
    },
    "entities": {
      "type": "array", "minItems": 1, "maxItems": 20,
      "items": {
        "type": "object", "additionalProperties": false, "required": ["type", "text", "confidence"],
        "properties": {
          "type": {"type": "string"},
          "text": {"type": "string", "minLength": 1, "maxLength": 200},
          "confidence": {"type": "number", "minimum": 0, "maximum": 1}
        }
      }
    },
    "actions": {
      "type": "array", "minItems": 1, "maxItems": 10,
      "items": {
        "type": "object", "additionalProperties": false, "required": ["step", "owner", "description", "due_hours"],
        "properties": {
          "step": {"type": "integer", "minimum": 1, "maximum": 10},
          "owner": {"type": "string", "enum": ["agent", "billing", "engineering", "logistics", "customer"]},
          "description": {"type": "string", "minLength": 10, "maxLength": 300},
          "due_hours": {"type": "integer", "minimum": 0, "maximum": 720}
        }
      }
    },
    "flags": {
      "type": "object", "additionalProperties": false, "required": ["refund_requested", "legal_threat", "churn_risk"],
      "properties": {
        "refund_requested": {"type": "boolean"},
        "legal_threat": {"type": "boolean"},
        "churn_risk": {"type": "boolean"}
      }
    },
    "summary": {"type": "string", "minLength": 20, "maxLength": 600}
  }
}`

// benchOutput is the model's reply the mock returns: valid against
// benchSchema and the labels policy.
var benchOutput = compact(`{
  "ticket_id": "TCK-20240917-0042",
  "category": "billing",
  "priority": 2,
  "language": "en",
  "sentiment": {"label": "negative", "score": 0.82},
  "customer": {"name": "Dana Whitfield", "tier": "gold", "account_age_days": 1460, "region": "eu-west"},
  "entities": [
    {"type": "order", "text": "ORD-99812", "confidence": 0.98},
    {"type": "amount", "text": "EUR 129.00", "confidence": 0.95},
    {"type": "date", "text": "12 September", "confidence": 0.91},
    {"type": "product", "text": "Pro annual plan", "confidence": 0.88},
    {"type": "person", "text": "Dana Whitfield", "confidence": 0.97},
    {"type": "location", "text": "Rotterdam", "confidence": 0.74}
  ],
  "actions": [
    {"step": 1, "owner": "billing", "description": "Confirm the duplicate charge of EUR 129.00 on order ORD-99812 in the payment ledger.", "due_hours": 4},
    {"step": 2, "owner": "billing", "description": "Refund the second charge to the original card and send the refund reference.", "due_hours": 24},
    {"step": 3, "owner": "agent", "description": "Reply to the customer with an apology, the refund timeline and a goodwill credit.", "due_hours": 8},
    {"step": 4, "owner": "engineering", "description": "Check the renewal job for retries that double-charge annual plans.", "due_hours": 72}
  ],
  "flags": {"refund_requested": true, "legal_threat": false, "churn_risk": true},
  "summary": "A gold-tier customer in Rotterdam was charged twice (EUR 129.00 each) for the Pro annual plan renewal on 12 September under order ORD-99812, asks for the duplicate to be refunded within the week and says they will cancel the subscription if it happens again."
}`)

// invalidMarker in the user message makes the mock reply with an output
// the contract rejects (a category outside the label set), so the
// preflight can prove contractd really validates.
const invalidMarker = "BENCH-INVALID"

var benchInvalidOutput = strings.Replace(benchOutput, `"category":"billing"`, `"category":"refunds"`, 1)

func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(err)
	}
	return b.String()
}

// completionBody is the mock upstream's chat completion around content.
func completionBody(content string) []byte {
	b, err := json.Marshal(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": 1726560000, "model": "mock-model-2024-09-01",
		"system_fingerprint": "fp_bench",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content, "refusal": nil}, "logprobs": nil}},
		"usage": map[string]any{"prompt_tokens": 812, "completion_tokens": 402, "total_tokens": 1214},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// requestBody is what the load generator sends (to both targets).
func requestBody(marker string) []byte { return triageBody("messages", marker) }

// responsesBody is requestBody as a Responses API request: the same ticket,
// so both edges run the same contract on the same output.
func responsesBody(marker string) []byte { return triageBody("input", marker) }

// triageBody is the ticket as the one user message under key.
func triageBody(key, marker string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": "triage",
		key:     []any{map[string]any{"role": "user", "content": ticket(marker)}},
		"user":  "bench-client",
	})
	return b
}

func ticket(marker string) string {
	return "Subject: Charged twice for my renewal " + marker + "\n\n" +
		"Hello, I was charged twice (EUR 129.00 each) for the Pro annual plan renewal on 12 September, order ORD-99812. " +
		"Please refund the duplicate within the week. If this happens again I will cancel. Dana Whitfield, Rotterdam."
}

// mockUpstream is the fast in-process upstream: it reads the request and
// answers a fixed completion (the invalid one when the marker is present).
type mockUpstream struct {
	valid, invalid []byte
	validLen       string
	invalidLen     string
}

func newMockUpstream() *mockUpstream {
	m := &mockUpstream{valid: completionBody(benchOutput), invalid: completionBody(benchInvalidOutput)}
	m.validLen, m.invalidLen = fmt.Sprint(len(m.valid)), fmt.Sprint(len(m.invalid))
	return m
}

var bufPool = make(chan *bytes.Buffer, 512)

// reply reads a request body and picks the completion to answer with:
// the invalid one when the marker is in the request.
func (m *mockUpstream) reply(req io.Reader) (body []byte, length string) {
	var buf *bytes.Buffer
	select {
	case buf = <-bufPool:
		buf.Reset()
	default:
		buf = new(bytes.Buffer)
	}
	_, _ = io.Copy(buf, req)
	body, length = m.valid, m.validLen
	if bytes.Contains(buf.Bytes(), []byte(invalidMarker)) {
		body, length = m.invalid, m.invalidLen
	}
	select {
	case bufPool <- buf:
	default:
	}
	return body, length
}

func (m *mockUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, n := m.reply(r.Body)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{n}
	_, _ = w.Write(body)
}

// configYAML is contractd's config for the run.
func configYAML(listen, admin, upstreamURL, logLevel string) string {
	return fmt.Sprintf(`# contractd-bench: generated for one benchmark run.
server:
  listen: %s
  admin_listen: %s
  max_body_bytes: 1048576
  request_timeout: 30s
  log_level: %s
audit:
  sink: none
upstreams:
  - name: mock
    base_url: %s
    timeout: 10s
    max_retries: 0
labels:
  - name: category
    values: [%s]
  - name: entity_type
    values: [%s]
prompts:
  - name: triage
    system: |
      You triage customer support tickets. Categories: {{ join (labels "category") ", " }}.
      Entity types: {{ join (labels "entity_type") ", " }}.
      Reply with one JSON object that matches this schema and nothing else:
      {{ schema }}
contracts:
  - name: triage_v1
    extraction: strict
    schema: %s
    policies:
      labels:
        - {path: /category, set: category}
        - {path: /entities/*/type, set: entity_type}
routes:
  - name: triage
    upstream: mock
    model: mock-model
    prompt: triage
    contract: triage_v1
    temperature: 0.2
    max_output_tokens: 800
  - name: hop
    upstream: mock
    model: mock-model
    passthrough: true
`, listen, admin, logLevel, upstreamURL, strings.Join(categories, ", "), strings.Join(entityTypes, ", "), compact(benchSchema))
}
