//go:build unix

package review

import (
	"os"
	"path/filepath"
	"testing"
)

// privateMode changes only a file the given user owns, and keeps the
// owner's own bits.
func TestPrivateMode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name      string
		mode      os.FileMode
		owner     bool
		wantAfter os.FileMode
	}{
		{"owned 0644", 0o644, true, 0o600},
		{"owned 0660", 0o660, true, 0o600},
		{"owned 0444", 0o444, true, 0o400},
		{"owned 0600", 0o600, true, 0o600},
		{"another user's 0644", 0o644, false, 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			uid := os.Geteuid()
			if !tc.owner {
				uid++ // the file is uid's only by the test's say: not this user's
			}
			privateMode(p, uid)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.wantAfter {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.wantAfter)
			}
		})
	}
	privateMode(filepath.Join(dir, "missing"), os.Geteuid()) // no file: nothing to do, no panic
}
