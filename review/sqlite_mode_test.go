//go:build unix

package review_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/review/storetest"
)

// The SQLite store holds what the audit holds only with include_content
// (the input, the client's body, every output), so its files are the
// owner's alone, as the audit file and the spool are (0600): SQLite
// created them 0644 under the usual umask, readable by every local user.
func TestSQLiteFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the usual one, whatever the runner's
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "reviews.db")
	s := storetest.OpenSQLite(t, p)
	if _, err := s.Create(context.Background(), storetest.NewItem("rv_mode", "r", time.Now()), false); err != nil {
		t.Fatal(err)
	}
	for f, m := range storeModes(t, p) {
		if m&0o077 != 0 {
			t.Errorf("%s has mode %v: others can read the review items", f, m)
		}
	}
}

// A store created by an older version (0644), and the -wal and -shm a run
// of it left behind, are made the owner's alone when contractd opens the
// store as the files' owner; the -wal and -shm created afterwards follow
// the database's mode.
func TestSQLiteExistingFilesMadePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "reviews.db")
	s := storetest.OpenSQLite(t, p)
	if _, err := s.Create(context.Background(), storetest.NewItem("rv_old", "r", time.Now()), false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// As an older version left them: the database 0644, and an empty -wal
	// and -shm (a run that did not close) 0644.
	for _, f := range []string{p + "-wal", p + "-shm"} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{p, p + "-wal", p + "-shm"} {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s = storetest.OpenSQLite(t, p)
	if _, err := s.Get(context.Background(), "rv_old"); err != nil {
		t.Fatalf("the item stored before: %v", err)
	}
	if _, err := s.Create(context.Background(), storetest.NewItem("rv_new", "r", time.Now()), false); err != nil {
		t.Fatal(err)
	}
	for f, m := range storeModes(t, p) {
		if m != 0o600 {
			t.Errorf("%s has mode %v after opening, want 0600", f, m)
		}
	}
}

// storeModes are the permission bits of the SQLite database p and of its
// -wal and -shm, by file name.
func storeModes(t *testing.T, p string) map[string]os.FileMode {
	t.Helper()
	out := map[string]os.FileMode{}
	for _, f := range []string{p, p + "-wal", p + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = fi.Mode().Perm()
	}
	return out
}
