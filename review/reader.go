package review

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Reader is what a reader of the store needs (contractd replay --reviews):
// the export and the whole item. Every Store is a Reader.
type Reader interface {
	Get(ctx context.Context, id string) (*Item, error)
	Export(ctx context.Context, f ExportFilter, fn func(*Item) error) error
	Close() error
}

// SchemaLevelError is a store opened by a reader (OpenSQLiteReader,
// OpenPostgresReader) whose applied migrations are not the ones this binary
// knows: readers never migrate, `contractd serve` does.
type SchemaLevelError struct {
	Store string // "review store reviews.db", "review store: postgres"
	// Have is the highest migration the store records (0: none) and
	// Applied how many it records; Want is the newest this binary embeds,
	// which has Want migrations.
	Have, Applied, Want int
}

func (e *SchemaLevelError) Error() string {
	if e.Have > e.Want {
		return fmt.Sprintf("%s is at schema level %d, newer than this contractd knows (%d): use the contractd that upgraded it", e.Store, e.Have, e.Want)
	}
	return fmt.Sprintf("%s is at schema level %d (%d of %d migrations applied), older than this contractd's %d: upgrade it by starting contractd serve with this binary on it first", e.Store, e.Have, e.Applied, e.Want, e.Want)
}

// checkLevel compares a store's recorded migrations (highest and count)
// with the embedded ones.
func checkLevel(store string, have, applied int, fsys embed.FS, dir string) error {
	ms, err := migrations(fsys, dir)
	if err != nil {
		return err
	}
	want := ms[len(ms)-1].version
	if have != want || applied != len(ms) {
		return &SchemaLevelError{Store: store, Have: have, Applied: applied, Want: want}
	}
	return nil
}

// newerLevel refuses a store that a newer contractd has migrated past this
// binary's migrations (a rollback, or an old replica restarted after an
// upgrade). Serving it would write rows without the columns and derived
// rows the newer migrations keep in step (0003/0004 made review_rules carry
// each item's status: an older binary would leave them stale), so serve
// treats it as a store that cannot be opened: items are spooled and the log
// says which binary to run. The caller sets Store.
func newerLevel(have, applied int, ms []migration) error {
	if want := ms[len(ms)-1].version; have > want {
		return &SchemaLevelError{Have: have, Applied: applied, Want: want}
	}
	return nil
}

// sqliteReader reads a SQLite store opened read-only.
type sqliteReader struct {
	db         *sql.DB
	exportPage int
}

// OpenSQLiteReader opens the store at file for reading only: SQLite's
// mode=ro with query_only, no migration, no change to the files' modes,
// no checkpointer. A missing file is an error (nothing is created), and a
// store whose migrations are not this binary's is a *SchemaLevelError.
func OpenSQLiteReader(ctx context.Context, file string) (Reader, error) {
	// SQLite would say only "unable to open database file (14)" for a
	// file that is not there or that this user may not read (0600, the
	// serving user's): the file system's reason says which.
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	f.Close()
	q := url.Values{}
	q.Set("mode", "ro")
	for _, p := range []string{"busy_timeout(10000)", "query_only(1)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+file+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	store := "review store " + file
	have, applied := 0, 0
	var tables int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables)
	if err == nil && tables > 0 {
		err = db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0), count(*) FROM schema_migrations`).Scan(&have, &applied)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", store, err)
	}
	if err := checkLevel(store, have, applied, sqliteMigrations, "migrations/sqlite"); err != nil {
		db.Close()
		return nil, err
	}
	return &sqliteReader{db: db, exportPage: exportPage}, nil
}

func (r *sqliteReader) Get(ctx context.Context, id string) (*Item, error) {
	return getItem(ctx, r.db, id)
}

func (r *sqliteReader) Export(ctx context.Context, f ExportFilter, fn func(*Item) error) error {
	return sqliteExport(ctx, r.db, r.exportPage, f, fn)
}

func (r *sqliteReader) Close() error { return r.db.Close() }

// pgReader reads a PostgreSQL store without migrating it, in read-only
// transactions.
type pgReader struct {
	pool       *pgxpool.Pool
	timeout    time.Duration
	exportPage int
}

// OpenPostgresReader connects to dsn for reading only: no migration, no
// advisory lock, every transaction read-only (default_transaction_read_only).
// A database whose migrations are not this binary's is a
// *SchemaLevelError. Errors never carry the DSN's password.
func OpenPostgresReader(ctx context.Context, dsn string) (Reader, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, dsnError(err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "contractd replay"
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	const timeout = 10 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("review store: postgres: %w", err)
	}
	const store = "review store: postgres"
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var exists bool
	if err := pool.QueryRow(qctx, `SELECT to_regclass('contractd_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", store, err)
	}
	have, applied := 0, 0
	if exists {
		if err := pool.QueryRow(qctx, `SELECT COALESCE(MAX(version), 0), count(*) FROM contractd_schema_migrations`).Scan(&have, &applied); err != nil {
			pool.Close()
			return nil, fmt.Errorf("%s: %w", store, err)
		}
	}
	if err := checkLevel(store, have, applied, postgresMigrations, "migrations/postgres"); err != nil {
		pool.Close()
		return nil, err
	}
	return &pgReader{pool: pool, timeout: timeout, exportPage: exportPage}, nil
}

func (r *pgReader) Get(ctx context.Context, id string) (*Item, error) {
	ctx, cancel := opCtx(ctx, r.timeout)
	defer cancel()
	return pgGetItem(ctx, r.pool, pgGet, id)
}

func (r *pgReader) Export(ctx context.Context, f ExportFilter, fn func(*Item) error) error {
	return pgExport(ctx, r.pool, r.timeout, r.exportPage, f, fn)
}

func (r *pgReader) Close() error {
	r.pool.Close()
	return nil
}

// opCtx gives a call without a deadline the timeout.
func opCtx(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}
