package review_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
)

// lastMigrationBlocked leaves the test database one level below the
// newest and holds the table the last migration indexes (webhook_outbox)
// locked in tx, on blocker (closed at t's end), so that migration waits
// until tx ends.
func lastMigrationBlocked(t *testing.T) (dsn string, blocker *pgx.Conn, tx pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	dsn = testkit.PostgresDSN(t)
	if err := review.PostgresAtLevel(ctx, dsn, review.PostgresLevels()-1, true); err != nil {
		t.Fatal(err)
	}
	blocker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blocker.Close(ctx) })
	if tx, err = blocker.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE webhook_outbox IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return dsn, blocker, tx
}

// A migration that takes longer than the store calls' deadline applies,
// and a replica starting meanwhile waits for it rather than giving up: the
// migrations had 3 x OpTimeout for the lock wait and every migration
// together, so one rewriting a large table rolled back at every start.
// Here the last migration (an index on webhook_outbox) is held up for
// 4 s by a table lock, 4 times OpTimeout (the old budget was 3 s), while
// two stores open.
func TestPostgresMigrationOutlastsOpTimeout(t *testing.T) {
	ctx := context.Background()
	dsn, blocker, tx := lastMigrationBlocked(t)
	const op = time.Second
	var wg sync.WaitGroup
	errs := make([]error, 2)
	took := make([]time.Duration, 2)
	for i := range errs {
		wg.Go(func() {
			start := time.Now()
			s, err := review.OpenPostgres(ctx, dsn, review.PostgresOptions{OpTimeout: op})
			took[i], errs[i] = time.Since(start), err
			if err == nil {
				s.Close()
			}
		})
	}
	time.Sleep(4 * time.Second)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("store %d: %v after %v", i, err, took[i].Round(time.Millisecond))
		} else if took[i] < 3500*time.Millisecond {
			t.Errorf("store %d opened after %v, before the migration could apply", i, took[i])
		}
	}
	var n, v int
	if err := blocker.QueryRow(ctx, `SELECT count(*), max(version) FROM contractd_schema_migrations`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != review.PostgresLevels() || v != review.PostgresLevels() {
		t.Errorf("%d migrations recorded, the newest %d; want %d", n, v, review.PostgresLevels())
	}
}

// The budget still ends a migration that cannot apply, with the
// deadline's error, and leaves the store at its level.
func TestPostgresMigrationBudgetEnds(t *testing.T) {
	ctx := context.Background()
	dsn, blocker, tx := lastMigrationBlocked(t)
	defer tx.Rollback(ctx)
	start := time.Now()
	s, err := review.OpenPostgres(ctx, dsn, review.PostgresOptions{MigrateTimeout: 500 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatal("opened with its migration blocked")
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %v, want about the 500 ms budget", d)
	}
	tx.Rollback(ctx)
	var n int
	if err := blocker.QueryRow(ctx, `SELECT count(*) FROM contractd_schema_migrations`).Scan(&n); err != nil || n != review.PostgresLevels()-1 {
		t.Errorf("%d migrations recorded (%v), want %d", n, err, review.PostgresLevels()-1)
	}
}
