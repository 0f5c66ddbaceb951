package review_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// Commits never run a checkpoint (that put 100+ ms into the answer that
// crossed the threshold); the checkpointer copies the WAL into the
// database file beside them, so the file grows while the store is open.
func TestSQLiteCheckpointsInBackground(t *testing.T) {
	create := func(s review.Store) {
		now := time.Now()
		for i := range 300 {
			if _, err := s.Create(context.Background(), storetest.NewItem(fmt.Sprint("ck", i), "a", now), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// With the checkpointer idle, 300 commits leave the database file as
	// the migrations left it.
	idle := filepath.Join(t.TempDir(), "idle.db")
	s, err := review.OpenSQLiteCheckpointEvery(context.Background(), idle, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, idle)
	create(s)
	if got := fileSize(t, idle); got != before {
		t.Fatalf("database file changed from %d to %d bytes on commit: a commit ran a checkpoint", before, got)
	}
	s.Close()

	p := filepath.Join(t.TempDir(), "reviews.db")
	if s, err = review.OpenSQLite(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before = fileSize(t, p)
	create(s)
	deadline := time.Now().Add(5 * time.Second)
	for fileSize(t, p) < before+300*512 {
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes after 5 s (was %d): the WAL was not checkpointed", fileSize(t, p), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A file written before the dedupe columns existed opens, keeps its items,
// and answers RecentDedupe.
func TestSQLiteMigrateFrom0001(t *testing.T) {
	p := filepath.Join(t.TempDir(), "reviews.db")
	db, err := sql.Open("sqlite", "file:"+p)
	if err != nil {
		t.Fatal(err)
	}
	init, err := os.ReadFile("migrations/sqlite/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_ns INTEGER NOT NULL)`,
		string(init),
		`INSERT INTO schema_migrations VALUES (1, 0)`,
		`INSERT INTO reviews (id, status, created_ns, route, prompt_name, prompt_sha, contract_name, contract_sha, key_id, input, request, attempts)
		 VALUES ('old', 'pending', 1, 'a', 'p', 'aa', 'k', 'bb', '', 'null', 'null', '[]')`,
		`INSERT INTO review_rules (review_id, rule, created_ns) VALUES ('old', 'required', 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := review.OpenSQLite(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
	// Migration 0004 copied the item's status, route and contract into its
	// rule rows, which rule filters now read.
	items, _, err := s.List(context.Background(), review.Filter{Rule: "required", Status: review.StatusPending, Route: "a", Contract: "k"})
	if err != nil || len(items) != 1 || items[0].ID != "old" {
		t.Fatalf("rule filter after migrating: %v %v", items, err)
	}
	// Migration 0006 rebuilt review_rules without a rowid, keeping its rows.
	var wr int
	db, err = sql.Open("sqlite", "file:"+p)
	if err == nil {
		err = db.QueryRow(`SELECT wr FROM pragma_table_list WHERE name = 'review_rules'`).Scan(&wr)
		db.Close()
	}
	if err != nil || wr != 1 {
		t.Fatalf("review_rules WITHOUT ROWID: %d %v", wr, err)
	}
	if recs, err := s.RecentDedupe(context.Background(), time.Unix(0, 0), time.Unix(0, 0), 10); err != nil || len(recs) != 0 {
		t.Fatal(recs, err)
	}
}
