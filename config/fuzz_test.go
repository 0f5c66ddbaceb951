package config

import (
	"os"
	"testing"
)

// FuzzLoadBytes: any config text yields a Runtime or problems, never a panic.
func FuzzLoadBytes(f *testing.F) {
	if b, err := os.ReadFile("testdata/full.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(base))
	f.Add([]byte("server: {listen: \"${X}\"}\nroutes: [{name: r}]\n"))
	f.Add([]byte("contracts: [{name: k, schema: {type: object, properties: {a: &x {type: string}, b: *x}}}]\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rt, err := LoadBytes("fuzz.yaml", b)
		if err == nil && rt == nil {
			t.Fatal("nil runtime without error")
		}
	})
}
