package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"
)

// POST /admin/check {route, output, input?} answers the verdict
// `contractd check --route` prints for the same output and input: the
// route's contract, prompt_leak against its rendered system prompt, and
// without an input the prompt's example_input (which evidence sources
// then point into).
func TestAdminCheckIsTheCheckVerdict(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	text := edited(t, renderConfig(cfgOpts{upstream: up.URL()}), "      labels: [{path: /sentiment, set: sentiment}]",
		"      labels: [{path: /sentiment, set: sentiment}]\n      prompt_leak: true\n      evidence: [{path: /quote, source: /text}]")
	text = edited(t, text, "        summary: {type: string, maxLength: 200}",
		"        summary: {type: string, maxLength: 200}\n        quote: {type: string}")
	cfg := writeConfig(t, dir, text)
	d := startDaemon(t, cfg, baseEnv())
	inputFile := filepath.Join(dir, "input.json")
	writeFile(t, inputFile, `{"text":"Cold soup and a long wait."}`)

	outputs := map[string]string{
		"leaks the prompt":         `{"sentiment":"positive","summary":"Classify the sentiment of one customer review. Allowed values: positive, negative, neutral."}`,
		"quotes the example input": `{"sentiment":"positive","summary":"ok","quote":"delivery was fast"}`,
		"quotes the given input":   `{"sentiment":"negative","summary":"slow","quote":"long wait"}`,
		"plain valid":              goodContent,
	}
	// The input as an object, or as a string: the --input file's text,
	// which is decoded as check decodes the file.
	inputs := map[string]any{
		"":                     nil,
		", with input":         map[string]any{"text": "Cold soup and a long wait."},
		", with input as text": `{"text":"Cold soup and a long wait."}`,
	}
	for name, out := range outputs {
		for suffix, input := range inputs {
			t.Run(name+suffix, func(t *testing.T) {
				outFile := filepath.Join(t.TempDir(), "out.json")
				writeFile(t, outFile, out)
				args := []string{"check", "-c", cfg, "--route", "review-sentiment"}
				body := map[string]any{"route": "review-sentiment", "output": out}
				if input != nil {
					args = append(args, "--input", inputFile)
					body["input"] = input
				}
				stdout, stderr, code := runCLI(t, "", append(args, outFile)...)
				if code != 0 && code != 1 {
					t.Fatalf("check exit %d: %s%s", code, stdout, stderr)
				}
				var cli, admin map[string]any
				if err := json.Unmarshal([]byte(stdout), &cli); err != nil {
					t.Fatalf("check output %q: %v", stdout, err)
				}
				b, _ := json.Marshal(body)
				resp, err := http.Post("http://"+d.Admin+"/admin/check", "application/json", bytes.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				rb, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || json.Unmarshal(rb, &admin) != nil {
					t.Fatalf("/admin/check %d: %s", resp.StatusCode, rb)
				}
				if !reflect.DeepEqual(cli, admin) {
					t.Errorf("verdicts differ\ncheck --route: %s\n/admin/check:  %s", stdout, rb)
				}
			})
		}
	}
}
