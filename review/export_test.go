package review

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OpenSQLiteCheckpointEvery opens a store whose checkpointer runs every d.
func OpenSQLiteCheckpointEvery(ctx context.Context, file string, d time.Duration) (*SQLite, error) {
	return openSQLite(ctx, file, d, walRestartAt)
}

// OpenSQLiteWAL opens a store whose checkpointer runs every d and whose
// WAL starts over past restartAt bytes.
func OpenSQLiteWAL(ctx context.Context, file string, d time.Duration, restartAt int64) (*SQLite, error) {
	return openSQLite(ctx, file, d, restartAt)
}

// SmallBatches makes one retention transaction delete 3 items and one
// export query read 2, so the store suite's retention and exports run in
// several batches and pages.
func SmallBatches(s Store) {
	switch s := s.(type) {
	case *SQLite:
		s.retentionBatch, s.exportPage = 3, 2
	case *Postgres:
		s.retentionBatch, s.exportPage = 3, 2
	default:
		panic(fmt.Sprintf("SmallBatches: %T", s))
	}
}

// oldItemSQL writes the item "old" of SQLiteAtLevel and PostgresAtLevel
// into a store at the first migration level: statements both dialects
// take as written.
var oldItemSQL = []string{
	`INSERT INTO reviews (id, status, created_ns, route, prompt_name, prompt_sha, contract_name, contract_sha, key_id, input, request, attempts)
	 VALUES ('old', 'pending', 1, 'a', 'p', 'aa', 'k', 'bb', '', 'null', 'null', '[{"attempt":1,"violations":[{"rule":"required"}]}]')`,
	`INSERT INTO review_rules (review_id, rule, created_ns) VALUES ('old', 'required', 1)`,
}

// SQLiteAtLevel creates file as a store left at migration level (its
// migrations up to level applied and recorded, no later one). With old,
// an item "old" (pending, rule "required", route "a", contract "k") is
// written right after the first migration, as a store that lived
// through every level holds items of the first.
func SQLiteAtLevel(file string, level int, old bool) error {
	ms, err := migrations(sqliteMigrations, "migrations/sqlite")
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_ns INTEGER NOT NULL)`); err != nil {
		return err
	}
	for _, m := range ms {
		if m.version > level {
			break
		}
		if _, err := db.Exec(m.body); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, m.version); err != nil {
			return err
		}
		if m.version == 1 && old {
			for _, q := range oldItemSQL {
				if _, err := db.Exec(q); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// SQLiteLevels is the number of SQLite migrations.
func SQLiteLevels() int {
	ms, _ := migrations(sqliteMigrations, "migrations/sqlite")
	return len(ms)
}

// PostgresAtLevel leaves the database at dsn at migration level, as
// SQLiteAtLevel does a file.
func PostgresAtLevel(ctx context.Context, dsn string, level int, old bool) error {
	ms, err := migrations(postgresMigrations, "migrations/postgres")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE contractd_schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	for _, m := range ms {
		if m.version > level {
			break
		}
		if _, err := conn.Exec(ctx, m.body); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO contractd_schema_migrations (version) VALUES ($1)`, m.version); err != nil {
			return err
		}
		if m.version == 1 && old {
			for _, q := range oldItemSQL {
				if _, err := conn.Exec(ctx, q); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// PostgresLevels is the number of PostgreSQL migrations.
func PostgresLevels() int {
	ms, _ := migrations(postgresMigrations, "migrations/postgres")
	return len(ms)
}
