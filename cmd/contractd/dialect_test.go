package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate warns, on stderr and with exit 0, about every keyword a schema's
// declared draft ignores, naming it.
func TestValidateWarnsAboutOtherDraftKeywords(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`contracts:
  - name: k
    schema:
      $schema: "http://json-schema.org/draft-04/schema#"
      type: object
      additionalProperties: false
      properties: {n: {type: integer}, k: {const: A}}
      if: {required: [n]}
      then: {required: [k]}
`), 0o644)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"validate", "-c", cfg}, &out, &errb); code != 0 || out.Len() != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"warning: " + cfg + ":3: contracts[0].schema: at #/properties/k: const is ignored: it is not a draft-04 keyword (introduced in draft-06)\n",
		"warning: " + cfg + ":3: contracts[0].schema: at #: if is ignored: it is not a draft-04 keyword (introduced in draft-07)\n",
		"warning: " + cfg + ":3: contracts[0].schema: at #: then is ignored: it is not a draft-04 keyword (introduced in draft-07)\n",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	// And check judges by that draft: 12345.0 is not a draft-04 integer.
	outFile := filepath.Join(dir, "out.json")
	os.WriteFile(outFile, []byte(`{"n":12345.0,"k":"A"}`), 0o644)
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"check", "-c", cfg, "--contract", "k", outFile}, &out, &errb); code != 1 ||
		!strings.Contains(out.String(), `"path": "/n",
      "rule": "type",`) {
		t.Fatalf("check: exit %d stdout %s stderr %s", code, out.String(), errb.String())
	}
}
