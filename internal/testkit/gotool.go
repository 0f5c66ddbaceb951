package testkit

import (
	"os"
	"path/filepath"
	"runtime"
)

// GoTool is the go command of the toolchain running the tests, so a build
// from a test uses the same Go as the test; "go" from PATH when that
// toolchain has no bin/go.
func GoTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
