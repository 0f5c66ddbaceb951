package contracts_test

import (
	"encoding/json"
	"testing"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/policy"
	"github.com/kaptinlin/jsonschema"
)

// The fixture lives in benchdata_test.go (shared with the fast-path benchmarks).
const benchSchema = contracts.BenchSchema

const benchOutput = contracts.BenchOutput

const benchSource = `Hello, my kitchen window broke during the storm last night and rain is coming in and the children sleep next door. I would like to file a claim, policy number HX-2291-7730. Please send someone today. Also why was my premium higher this month? I will talk to my lawyer if nothing happens. Regards, Jane`

func benchContract(b *testing.B) (*contracts.Contract, *contracts.Subject) {
	s, err := contracts.CompileSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	labels := []string{"claim_report", "billing_question", "complaint", "other", "motor", "home", "travel", "low", "normal", "high", "fraud_suspected", "legal_threat", "vulnerable_customer"}
	var pols []contracts.Policy
	for _, p := range []string{"/intents/*/label", "/primary_intent", "/product_line/label", "/urgency/label", "/risk_flags/*/label"} {
		pol, err := policy.NewLabels(p, "all", labels)
		if err != nil {
			b.Fatal(err)
		}
		pols = append(pols, pol)
	}
	for _, p := range []string{"/intents/*/evidence_snippets/*", "/product_line/evidence_snippets/*", "/urgency/evidence_snippets/*", "/risk_flags/*/evidence_snippets/*"} {
		pol, err := policy.NewEvidence(p, "/body")
		if err != nil {
			b.Fatal(err)
		}
		pols = append(pols, pol)
	}
	k := &contracts.Contract{Name: "bench", Schema: s, Mode: contracts.ModeStrict,
		Limits: contracts.Limits{MaxBytes: 65536, MaxDepth: contracts.DefaultMaxDepth}, Policies: pols}
	subj := &contracts.Subject{Input: map[string]any{"subject": "Broken window", "body": benchSource}}
	if res := k.Check(benchOutput, subj); !res.Valid {
		b.Fatalf("bench output must be valid: %v", res.Violations)
	}
	return k, subj
}

// BenchmarkBareValidateJSON is the baseline: kaptinlin's own parse and
// validation of the same bytes, with no extraction, normalisation or policies.
func BenchmarkBareValidateJSON(b *testing.B) {
	c := jsonschema.NewCompiler()
	c.SetAssertFormat(true)
	s, err := c.Compile([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(benchOutput)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if r := s.ValidateJSON(data); !r.IsValid() {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkCheckSchemaOnly is the engine without policies: strict
// extraction (duplicate keys, depth, UTF-8) plus schema validation.
func BenchmarkCheckSchemaOnly(b *testing.B) {
	k, subj := benchContract(b)
	k.Policies = nil
	benchValidCheck(b, k, subj)
}

// BenchmarkCheckFull is the whole check: extraction, schema, labels on 5
// paths and evidence lookups with offsets and hashes on 4 paths.
func BenchmarkCheckFull(b *testing.B) {
	k, subj := benchContract(b)
	benchValidCheck(b, k, subj)
}

// benchValidCheck checks benchOutput, which must stay valid, b.N times.
func benchValidCheck(b *testing.B, k *contracts.Contract, subj *contracts.Subject) {
	b.SetBytes(int64(len(benchOutput)))
	b.ReportAllocs()
	for b.Loop() {
		if res := k.Check(benchOutput, subj); !res.Valid {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkCheckInvalid measures the reject path (violations normalised,
// sorted) on an output with several schema and policy failures.
func BenchmarkCheckInvalid(b *testing.B) {
	k, subj := benchContract(b)
	var v map[string]any
	_ = json.Unmarshal([]byte(benchOutput), &v)
	v["primary_intent"] = "nope"
	v["extra"] = true
	v["urgency"].(map[string]any)["confidence"] = 3
	bad, _ := json.Marshal(v)
	out := string(bad)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if res := k.Check(out, subj); res.Valid {
			b.Fatal("valid")
		}
	}
}
