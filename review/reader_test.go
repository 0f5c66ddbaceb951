//go:build unix

package review_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

// dirState is every file of a directory: name, mode and bytes.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprintf("%v %x", fi.Mode(), b)
	}
	return out
}

// unchanged checks that every file of dir is as in before. The one thing a
// SQLite reader of a WAL database may add is what SQLite needs to read it
// when no other process has it open: an empty -wal and the -shm, with the
// database's mode (the next serve removes them when it closes).
func unchanged(t *testing.T, dir, db string, before map[string]string) {
	t.Helper()
	after := dirState(t, dir)
	for name, st := range before {
		if after[name] != st {
			t.Errorf("%s changed:\nbefore %.120s\nafter  %.120s", name, st, after[name])
		}
	}
	dbMode, _, _ := strings.Cut(before[db], " ")
	for name, st := range after {
		if _, ok := before[name]; ok {
			continue
		}
		mode, content, _ := strings.Cut(st, " ")
		switch {
		case name == db+"-shm" && mode == dbMode:
		case name == db+"-wal" && mode == dbMode && content == "":
		default:
			t.Errorf("%s was created: %.120s", name, st)
		}
	}
}

// sqliteVersions is what schema_migrations records.
func sqliteVersions(t *testing.T, file string) []int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return testkit.QueryColumn[int](t, db, `SELECT version FROM schema_migrations ORDER BY version`)
}

// wantSchemaLevelError: opening a reader (r, err) on a store at level
// failed with a *review.SchemaLevelError from level to want, this
// binary's; a reader that opened anyway is closed.
func wantSchemaLevelError(t *testing.T, r review.Reader, err error, level, want int) {
	t.Helper()
	var le *review.SchemaLevelError
	if !errors.As(err, &le) || le.Have != level || le.Want != want {
		if r != nil {
			r.Close()
		}
		t.Fatalf("open: %v, want a SchemaLevelError at %d of %d", err, level, want)
	}
}

// A reader (contractd replay --reviews) of a SQLite store left at any
// older level is refused with a *SchemaLevelError and changes nothing: the
// files' bytes and modes (0644, which serve would make 0600), no file
// created but SQLite's own (unchanged), the recorded migrations as they were.
func TestSQLiteReaderLeavesOlderStoreAlone(t *testing.T) {
	ctx := context.Background()
	for level := 1; level < review.SQLiteLevels(); level++ {
		t.Run(fmt.Sprintf("level-%d", level), func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "reviews.db")
			if err := review.SQLiteAtLevel(file, level, true); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", "file:"+file)
			if err != nil {
				t.Fatal(err)
			}
			// As serve leaves it: in WAL mode.
			if _, err := db.Exec(`PRAGMA journal_mode=WAL`); err != nil {
				t.Fatal(err)
			}
			db.Close()
			if err := os.Chmod(file, 0o644); err != nil {
				t.Fatal(err)
			}
			before, versions := dirState(t, dir), sqliteVersions(t, file)
			r, err := review.OpenSQLiteReader(ctx, file)
			wantSchemaLevelError(t, r, err, level, review.SQLiteLevels())
			if want := "upgrade it by starting contractd serve"; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			unchanged(t, dir, "reviews.db", before)
			if got := sqliteVersions(t, file); !slices.Equal(got, versions) {
				t.Errorf("migrations %v, were %v", got, versions)
			}
		})
	}
}

// A reader of a store at this binary's level reads its items and changes
// nothing either: a store serve wrote and closed keeps its bytes and its
// 0644 (a reader does not chmod).
func TestSQLiteReaderReadsCurrentStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "reviews.db")
	s := storetest.OpenSQLite(t, file)
	if _, err := s.Create(ctx, storetest.NewItem("rv_1", "r", time.Now()), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	r, err := review.OpenSQLiteReader(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := r.Export(ctx, review.ExportFilter{}, func(it *review.Item) error { ids = append(ids, it.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	it, err := r.Get(ctx, "rv_1")
	if err != nil || it.Request == nil {
		t.Fatalf("get: %v %v", it, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"rv_1"}) {
		t.Errorf("exported %v", ids)
	}
	unchanged(t, dir, "reviews.db", before)
}

// A reader of a PostgreSQL database at any older level (or with no
// schema at all) is refused with a *SchemaLevelError and migrates nothing;
// at the current level it reads, in read-only transactions.
func TestPostgresReaderLeavesOlderStoreAlone(t *testing.T) {
	ctx := context.Background()
	count := func(t *testing.T, dsn, q string) int {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const tables = `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`
	for level := 0; level < review.PostgresLevels(); level++ {
		t.Run(fmt.Sprintf("level-%d", level), func(t *testing.T) {
			dsn := testkit.PostgresDSN(t)
			if level > 0 {
				if err := review.PostgresAtLevel(ctx, dsn, level, true); err != nil {
					t.Fatal(err)
				}
			}
			before := count(t, dsn, tables)
			r, err := review.OpenPostgresReader(ctx, dsn)
			wantSchemaLevelError(t, r, err, level, review.PostgresLevels())
			if after := count(t, dsn, tables); after != before {
				t.Errorf("%d tables, were %d", after, before)
			}
			if level > 0 {
				if n := count(t, dsn, `SELECT count(*) FROM contractd_schema_migrations`); n != level {
					t.Errorf("%d migrations recorded, were %d", n, level)
				}
			}
		})
	}
	t.Run("current", func(t *testing.T) {
		dsn := testkit.PostgresDSN(t)
		s, err := review.OpenPostgres(ctx, dsn, review.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, storetest.NewItem("rv_1", "r", time.Now()), false); err != nil {
			t.Fatal(err)
		}
		s.Close()
		r, err := review.OpenPostgresReader(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var ids []string
		if err := r.Export(ctx, review.ExportFilter{}, func(it *review.Item) error { ids = append(ids, it.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		if it, err := r.Get(ctx, "rv_1"); err != nil || it.Request == nil || !slices.Equal(ids, []string{"rv_1"}) {
			t.Fatalf("get: %v %v; exported %v", it, err, ids)
		}
	})
}
