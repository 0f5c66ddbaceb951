package proxy

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
)

func (h *harness) get(path, key string) *result {
	h.t.Helper()
	return send(h.t, h.client, "GET", h.front.URL+path, "", key)
}

var createdRE = regexp.MustCompile(`"created":\d+`)

// GET /v1/models/{route} is the route's model object with the contract it
// enforces: name, sha256 and the schema exactly as {{ schema }} prints it.
func TestModelDetail(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	k := h.rt.Routes["classify"].Contract
	for _, path := range []string{"/v1/models/classify", "/r/classify/v1/models/classify"} {
		r := h.get(path, clientKey)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
		wantRequestID(t, r)
		checkGolden(t, "model_classify.json", createdRE.ReplaceAll(r.Body, []byte(`"created":0`)))
		var m struct {
			ID       string `json:"id"`
			Contract struct {
				Name   string          `json:"name"`
				SHA256 string          `json:"sha256"`
				Schema json.RawMessage `json:"schema"`
			} `json:"contract"`
		}
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		if m.ID != "classify" || m.Contract.Name != k.Name || m.Contract.SHA256 != k.SHA256 || string(m.Contract.Schema) != string(k.Schema.JSON()) {
			t.Errorf("%s: %s", path, r.Body)
		}
	}
	if r := h.get("/v1/models/raw", clientKey); r.Status != 200 || !strings.Contains(string(r.Body), `"contract":null`) || r.JSON["id"] != "raw" {
		t.Errorf("passthrough: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		path, key string
		status    int
		code      ErrorCode
	}{
		{"/v1/models/nope", clientKey, 404, CodeModelNotFound},
		{"/r/free/v1/models/classify", clientKey, 404, CodeModelNotFound}, // under /r/free/ only free exists
		{"/r/nope/v1/models/nope", clientKey, 404, CodeModelNotFound},
		{"/v1/models/classify", "", 401, CodeInvalidAPIKey},
		{"/v1/models/classify", "wrong", 401, CodeInvalidAPIKey},
	} {
		r := h.get(c.path, c.key)
		if r.Status != c.status || r.errorObj()["code"] != string(c.code) {
			t.Errorf("%s key %q: %d %s", c.path, c.key, r.Status, r.Body)
		}
		wantRequestID(t, r)
	}
}

// A reload that changes the contract shows at once.
func TestModelDetailFollowsReload(t *testing.T) {
	h := newHarness(t, always(validAnswer), cfg{})
	before := h.get("/v1/models/free", clientKey).JSON["contract"].(map[string]any)["sha256"]
	changed := strings.Replace(configYAML(h.up.URL(), cfg{}), "forbidden-word", "other-word", 1)
	rt := testkit.LoadRuntime(t, filepath.Join("testdata", "contractd.yaml"), changed)
	h.srv.Swap(rt)
	after := h.get("/v1/models/free", clientKey).JSON["contract"].(map[string]any)
	if after["sha256"] == before || after["sha256"] != rt.Routes["free"].Contract.SHA256 {
		t.Fatalf("sha256 %v then %v", before, after["sha256"])
	}
}
