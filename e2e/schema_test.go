package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// `contractd schema --route NAME` prints the schema GET /v1/models/{route}
// serves as contract.schema (indented, keys in file order); both come from
// the real binary on one config.
func TestSchemaCommandMatchesModelEndpoint(t *testing.T) {
	up := newUpstream(t, byModel)
	cfg := writeConfig(t, t.TempDir(), renderConfig(cfgOpts{upstream: up.URL(),
		routes: "  - name: raw\n    upstream: fake\n    model: fake-good\n    passthrough: true\n"}))
	out, errOut, code := runCLI(t, "", "schema", "-c", cfg, "--route", "review-sentiment")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	const schema = `{"type":"object","required":["sentiment","summary"],"additionalProperties":false,"properties":{"sentiment":{"type":"string"},"summary":{"type":"string","maxLength":200}}}`
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(out)); err != nil || compact.String() != schema || !strings.Contains(out, "\n  \"type\": \"object\",\n") {
		t.Fatalf("schema printed:\n%s", out)
	}

	d := startDaemon(t, cfg, baseEnv())
	get := func(path string) (int, []byte) {
		resp, b := sendAs(t, http.MethodGet, "http://"+d.API+path, clientKey, "")
		return resp.StatusCode, b
	}
	for _, path := range []string{"/v1/models/review-sentiment", "/r/review-sentiment/v1/models/review-sentiment"} {
		status, b := get(path)
		var m struct {
			ID       string `json:"id"`
			Object   string `json:"object"`
			Contract struct {
				Name   string          `json:"name"`
				SHA256 string          `json:"sha256"`
				Schema json.RawMessage `json:"schema"`
			} `json:"contract"`
		}
		if status != 200 || json.Unmarshal(b, &m) != nil || m.ID != "review-sentiment" || m.Object != "model" ||
			m.Contract.Name != "sentiment_v1" || len(m.Contract.SHA256) != 64 || string(m.Contract.Schema) != schema {
			t.Fatalf("%s: %d %s", path, status, b)
		}
	}
	if status, b := get("/v1/models/raw"); status != 200 || !bytes.Contains(b, []byte(`"contract":null`)) {
		t.Fatalf("passthrough: %d %s", status, b)
	}

	for name, args := range map[string][]string{
		"unknown route":     {"schema", "-c", cfg, "--route", "nope"},
		"passthrough route": {"schema", "-c", cfg, "--route", "raw"},
		"no route":          {"schema", "-c", cfg},
	} {
		out, errOut, code := runCLI(t, "", args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %s", name, code, out, errOut)
		}
	}
}
