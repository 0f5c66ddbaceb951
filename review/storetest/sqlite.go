package storetest

import (
	"context"
	"testing"

	"github.com/contractd/contractd/review"
)

// OpenSQLite opens (creating and migrating) the SQLite store at path as
// serve does, failing t when it cannot, and closes it at t's end: the
// open, check and close every test of a SQLite store wrote out. Close is
// once-guarded, so a test may close the store earlier (to reopen the file,
// or read it with something else) and the cleanup does nothing.
func OpenSQLite(t testing.TB, path string) *review.SQLite {
	t.Helper()
	s, err := review.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
