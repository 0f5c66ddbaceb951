package sim

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
)

const demoConfig = "../../examples/demo/contractd.yaml"

// loadCatalog is the sim's catalog of the config at path.
func loadCatalog(t *testing.T, path string) *Catalog {
	t.Helper()
	cat, err := LoadCatalog(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cat
}

// exampleConfigs are every contractd config under examples/.
func exampleConfigs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*/contractd.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configs found: %v", err)
	}
	return files
}

// call is one upstream request as contractd would send it for a route.
type call struct {
	route  *config.Route
	input  any // the template input (object, or the user text)
	system string
	user   string
}

// readFile is the content of the file at path; a file that cannot be read
// fails the test.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// calls renders every contract route of a config with its example input
// and with each input file of the config's inputs/ directory that the
// route's input schema accepts.
func calls(t *testing.T, path string) (*config.Runtime, []call) {
	t.Helper()
	rt, err := config.Load(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var inputs []any
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "inputs", "*.json"))
	for _, f := range files {
		v, err := contracts.DecodeJSON(readFile(t, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		inputs = append(inputs, v)
	}
	var out []call
	for _, r := range rt.RouteList {
		if r.Passthrough {
			continue
		}
		ins := []any{r.Prompt.ExampleInput}
		if r.Prompt.InputSchema != nil {
			for _, in := range inputs {
				if len(r.Prompt.InputSchema.Validate(in)) == 0 {
					ins = append(ins, in)
				}
			}
		}
		for _, in := range ins {
			c := call{route: r, input: in}
			d := contracts.TemplateData{Input: in}
			if c.system, err = r.Prompt.RenderSystem(d); err != nil {
				t.Fatalf("%s: render: %v", r.Name, err)
			}
			u, ok, err := r.Prompt.RenderUser(d)
			if err != nil {
				t.Fatalf("%s: render user: %v", r.Name, err)
			}
			if ok {
				c.user = u
			} else {
				c.user, _ = in.(string)
			}
			out = append(out, c)
		}
	}
	return rt, out
}

// subjectFor is the Subject contractd builds for the call.
func (c call) subjectFor() *contracts.Subject {
	s := &contracts.Subject{LastUser: c.user, HasLastUser: true, SystemPrompt: c.system}
	if c.route.Prompt.InputSchema != nil {
		s.Input = c.input
	}
	return s
}

// body is the upstream request body for the call at a temperature.
func (c call) body(t *testing.T, temp float64, mode string, extra string) ([]byte, *Request) {
	t.Helper()
	m := map[string]any{
		"model": c.route.Model,
		"messages": []any{
			map[string]any{"role": "system", "content": c.system},
			map[string]any{"role": "user", "content": c.user},
		},
		"temperature": temp,
		"max_tokens":  c.route.MaxOutputTokens,
	}
	switch c.route.ResponseFormat {
	case "json_object":
		m["response_format"] = map[string]any{"type": "json_object"}
	case "json_schema":
		m["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": c.route.Contract.Name, "strict": true, "schema": json.RawMessage(c.route.Contract.Schema.JSON())}}
	}
	if mode != "" {
		m["sim_mode"] = mode
	}
	if extra != "" {
		m["user"] = extra
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var req Request
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	return b, &req
}

// judge is contractd's verdict on a reply (proxy.judge: upstream
// violations first, then the contract).
func judge(k *contracts.Contract, rep *Reply, s *contracts.Subject) []string {
	var rules []string
	switch {
	case rep.Finish == "length":
		rules = append(rules, contracts.RuleOutputTruncated)
	case rep.Refusal != "":
		rules = append(rules, contracts.RuleModelRefusal)
	}
	content := ""
	if rep.Content != nil {
		content = *rep.Content
	}
	if len(rules) > 0 && strings.TrimSpace(content) == "" {
		return rules
	}
	for _, v := range k.Check(content, s).Violations {
		rules = append(rules, v.Rule)
	}
	return rules
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
