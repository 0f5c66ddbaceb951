package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type sampleExpect struct {
	Valid bool     `json:"valid"`
	Input *string  `json:"input"`
	Route string   `json:"route"`
	Rules []string `json:"rules"`
}

// TestExamples runs `contractd validate` on every example config and
// `contractd check` on every sample output beside it, so the examples users
// try first never rot. Each sample's expected verdict and rule ids live in
// samples/<contract>/expect.json.
func TestExamples(t *testing.T) {
	configs, _ := filepath.Glob("../../examples/*/contractd.yaml")
	if len(configs) < 5 {
		t.Fatalf("found %d example configs, want the five seed systems at least", len(configs))
	}
	checked := 0
	for _, cfg := range configs {
		dir := filepath.Dir(cfg)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test-examples")
			var out, errb bytes.Buffer
			if code := run(context.Background(), []string{"validate", "-c", cfg}, &out, &errb); code != 0 {
				t.Fatalf("validate exit %d:\n%s%s", code, out.String(), errb.String())
			}
			expects, _ := filepath.Glob(filepath.Join(dir, "samples", "*", "expect.json"))
			if len(expects) == 0 && strings.HasPrefix(filepath.Base(dir), "00") {
				t.Fatal("a seed example without samples")
			}
			for _, ef := range expects {
				contract := filepath.Base(filepath.Dir(ef))
				raw, err := os.ReadFile(ef)
				if err != nil {
					t.Fatal(err)
				}
				var exp map[string]sampleExpect
				if err := json.Unmarshal(raw, &exp); err != nil {
					t.Fatalf("%s: %v", ef, err)
				}
				for _, f := range slices.Sorted(maps.Keys(exp)) {
					e := exp[f]
					args := []string{"check", "-c", cfg}
					if e.Route != "" {
						args = append(args, "--route", e.Route)
					} else {
						args = append(args, "--contract", contract)
					}
					if e.Input != nil {
						args = append(args, "--input", filepath.Join(dir, *e.Input))
					}
					args = append(args, filepath.Join(filepath.Dir(ef), f))
					var out, errb bytes.Buffer
					code := run(context.Background(), args, &out, &errb)
					want := 1
					if e.Valid {
						want = 0
					}
					if code != want {
						t.Errorf("%s/%s: exit %d, want %d\n%s%s", contract, f, code, want, out.String(), errb.String())
						continue
					}
					var res checkOutput
					if err := json.Unmarshal(out.Bytes(), &res); err != nil {
						t.Fatalf("%s/%s: output not JSON: %v", contract, f, err)
					}
					got := []string{}
					for _, v := range res.Violations {
						got = append(got, v.Rule)
					}
					slices.Sort(got)
					got = slices.Compact(got)
					wantRules := append([]string{}, e.Rules...)
					slices.Sort(wantRules)
					if !reflect.DeepEqual(got, wantRules) {
						t.Errorf("%s/%s: rules %v, want %v", contract, f, got, wantRules)
					}
					checked++
				}
			}
		})
	}
	t.Logf("checked %d samples", checked)
}

func TestCheckUsageErrors(t *testing.T) {
	cfg := "../../examples/002-triage/contractd.yaml"
	for _, args := range [][]string{
		{"check", "-c", cfg, "--contract", "nope", "x.json"},
		{"check", "-c", cfg, "--contract", "classify_v1", "/nonexistent/out.json"},
		{"check", "-c", cfg},
		{"check", "-c", "/nonexistent.yaml", "--contract", "x"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

func TestValidateOutputFormat(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("upstreams: [{name: u, base_url: \"http://127.0.0.1:1\"}]\nprompts: [{name: p, system: x}]\ncontracts: [{name: k, schema: {type: object}}]\nroutes: [{name: r, upstream: u, model: m, prompt: p, contract: nope, temperature: 1}]\nbogus: 1\n"), 0o644)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"validate", "-c", cfg}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	// Decoding problems are reported first (a half-decoded file would
	// cascade into misleading reference errors)...
	if got := strings.TrimSpace(out.String()); got != cfg+`:5: bogus: unknown key "bogus" (allowed here: server, audit, upstreams, labels, prompts, contracts, routes, review)` {
		t.Errorf("stdout:\n%s", got)
	}
	// ...then, once the file decodes, every reference problem, one line each.
	os.WriteFile(cfg, []byte("upstreams: [{name: u, base_url: \"http://127.0.0.1:1\"}]\nprompts: [{name: p, system: x}]\ncontracts: [{name: k, schema: {type: object}}]\nroutes: [{name: r, upstream: nou, model: m, prompt: p, contract: nope, temperature: 1}]\n"), 0o644)
	out.Reset()
	if code := run(context.Background(), []string{"validate", "-c", cfg}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != cfg+`:4: routes[0].upstream: unknown upstream "nou" (defined: u)` || lines[1] != cfg+`:4: routes[0].contract: unknown contract "nope" (defined: k)` {
		t.Errorf("stdout:\n%s", out.String())
	}
	os.WriteFile(cfg, []byte("contracts: [{name: k, schema: {type: object}}]\n"), 0o644)
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"validate", "-c", cfg}, &out, &errb); code != 0 || out.Len() != 0 || !strings.HasPrefix(errb.String(), "warning: "+cfg) {
		t.Errorf("warnings only: exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
}
