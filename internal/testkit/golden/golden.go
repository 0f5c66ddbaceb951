// Package golden compares what a test produces with golden files kept
// under testdata, and rewrites them when the test's update flag is set.
// It imports nothing of contractd's, so any package's tests may use it
// (testkit itself imports config, whose own tests could not import it).
// Like testkit, only tests may import it.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each runs f as a subtest for every file matching pattern, named by the
// file's base name less its extension, with the file's path and content.
// The test fails when nothing matches.
func Each(t *testing.T, pattern string, f func(t *testing.T, path string, content []byte)) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s: %v", pattern, err)
	}
	for _, p := range files {
		base := filepath.Base(p)
		t.Run(strings.TrimSuffix(base, filepath.Ext(base)), func(t *testing.T) {
			content, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f(t, p, content)
		})
	}
}

// Check compares got with the golden file at path. With update it writes
// got there instead (making the directory); flag names the test's update
// flag, for the message when the file is missing.
func Check(t testing.TB, path string, got []byte, update bool, flag string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run with %s)", path, err, flag)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n got %s\nwant %s", path, got, want)
	}
}
