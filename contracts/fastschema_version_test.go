package contracts

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// TestFastPathMirrorsTheLibraryInGoMod: go.mod, and the binary built from
// it, name the kaptinlin/jsonschema release the fast path mirrors. A
// different version fails here until the fast path is reviewed against it
// and mirroredJSONSchemaVersion moved.
func TestFastPathMirrorsTheLibraryInGoMod(t *testing.T) {
	const mod = "github.com/kaptinlin/jsonschema"
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	found := ""
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == mod {
			found = f[1]
		}
	}
	if found != mirroredJSONSchemaVersion {
		t.Errorf("go.mod requires %s %q; the fast path mirrors %s: review fastschema.go against the new release, then update mirroredJSONSchemaVersion", mod, found, mirroredJSONSchemaVersion)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == mod && d.Version != mirroredJSONSchemaVersion {
				t.Errorf("built with %s %s; the fast path mirrors %s", mod, d.Version, mirroredJSONSchemaVersion)
			}
		}
	}
}
