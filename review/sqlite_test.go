package review_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

func openSQLite(t *testing.T) review.Store {
	s, err := review.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLiteStore(t *testing.T) { storetest.Run(t, openSQLite) }

// Two processes opening one file at once must not both migrate.
func TestSQLiteMigrateTwice(t *testing.T) {
	p := filepath.Join(t.TempDir(), "reviews.db")
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			s, err := review.OpenSQLite(context.Background(), p)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
