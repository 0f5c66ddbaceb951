//go:build unix

package review_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// A store that a newer contractd migrated past this binary's level (a
// rollback, an old replica restarted after an upgrade) is refused by the
// serving openers with a *SchemaLevelError naming both levels, and nothing
// is written: serving it would leave the rows the newer migrations keep in
// step stale. serve then spools, as for a store that cannot be opened.
func TestServingOpenRefusesNewerStore(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, err error, want int, store string) {
		t.Helper()
		var le *review.SchemaLevelError
		if !errors.As(err, &le) || le.Have != want+1 || le.Want != want {
			t.Fatalf("open: %v, want a SchemaLevelError at %d of %d", err, want+1, want)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, store+" is at schema level") || !strings.Contains(msg, "newer than this contractd knows") {
			t.Errorf("error %q", msg)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "reviews.db")
		levels := review.SQLiteLevels()
		if err := review.SQLiteAtLevel(file, levels, false); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", "file:"+file)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_ns) VALUES (?, 1)`, levels+1); err != nil {
			t.Fatal(err)
		}
		s, err := review.OpenSQLite(ctx, file)
		if s != nil {
			s.Close()
		}
		check(t, err, levels, "review store "+file)
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != levels+1 {
			t.Errorf("%d migrations recorded (%v), want %d", n, err, levels+1)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testkit.PostgresDSN(t)
		levels := review.PostgresLevels()
		if err := review.PostgresAtLevel(ctx, dsn, levels, false); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `INSERT INTO contractd_schema_migrations (version) VALUES ($1)`, levels+1); err != nil {
			t.Fatal(err)
		}
		s, err := review.OpenPostgres(ctx, dsn, review.PostgresOptions{})
		if s != nil {
			s.Close()
		}
		check(t, err, levels, "review store: postgres")
	})
}
