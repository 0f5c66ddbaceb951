package review

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteOpenErrorsSayWhy: a SQLite store that cannot be opened says
// the file system's reason (here a path under a regular file, "not a
// directory", and a missing file for the reader, "no such file or
// directory"; a 0600 file of another user gives "permission denied" the
// same way), for serve's store and replay --reviews' reader alike. SQLite
// alone said "unable to open database file (14)" for all of them, which
// left an operator guessing (seen: replay --reviews run as another user
// than the serving one, and serve with a config in a directory it cannot
// write).
func TestSQLiteOpenErrorsSayWhy(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	under := filepath.Join(notDir, "reviews.db")
	if st, err := OpenSQLite(ctx, under); err == nil || !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), under) {
		if st != nil {
			st.Close()
		}
		t.Errorf("OpenSQLite(%s): %v, want the path and 'not a directory'", under, err)
	}
	for file, want := range map[string]string{under: "not a directory", filepath.Join(dir, "missing.db"): "no such file or directory"} {
		if r, err := OpenSQLiteReader(ctx, file); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
			if r != nil {
				r.Close()
			}
			t.Errorf("OpenSQLiteReader(%s): %v, want the path and %q", file, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Errorf("the reader created the missing file: %v", err)
	}
}
