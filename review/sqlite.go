package review

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // pure Go, no cgo
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// SQLite is the embedded store: one file, no server.
//
// Durability: WAL with synchronous=NORMAL. A commit has written the log
// with write(2) before Create returns, so the item is in the kernel's page
// cache and survives kill -9 or any crash of the process; what it does not
// survive is a power loss or kernel crash before the log reaches the disk,
// which the checkpointer's fsync (every 100 ms) bounds. FULL would fsync
// every commit: 1 to several ms that each needs_review answer waited for
// (docs/benchmarks.md), for a guarantee the product does not promise. New
// items are group-committed by one writer goroutine, so concurrent
// needs_review answers share a commit and its writes to the log. Writers take the lock at BEGIN (IMMEDIATE) so a
// read-then-write transaction never fails half way with SQLITE_BUSY.
type SQLite struct {
	db *sql.DB // readers
	w  *sql.DB // the one writer connection: writers queue in Go, not in SQLite's busy handler

	insItem, insRule *sql.Stmt // prepared once: parsing SQL per item costs more than the insert
	// The multi-row inserts by size (1 << index rows), prepared when first
	// used by the writer goroutine and closed by Close after it stopped.
	itemStmts    [8]*sql.Stmt
	recentDedupe *sql.Stmt // on the readers; polled by every process sharing the file

	batch     *batcher // one writer: SQLite has one write lock anyway
	closed    chan struct{}
	ckptDone  chan struct{}
	closeOnce sync.Once

	file     string
	pageSize int64
	// retentionBatch: items per retention transaction (retentionBatch
	// but in tests).
	retentionBatch int
	exportPage     int   // items per export query (exportPage but in tests)
	restartAt      int64 // walRestartAt but in tests
	// restartAsked is when the checkpointer asked the writer to finish a
	// checkpoint between batches (unix ns; 0: not asked), see between.
	restartAsked atomic.Int64
}

// OpenSQLite opens (creating when missing) the store at file and runs its
// migrations.
func OpenSQLite(ctx context.Context, file string) (*SQLite, error) {
	return openSQLite(ctx, file, checkpointEvery, walRestartAt)
}

func openSQLite(ctx context.Context, file string, every time.Duration, restartAt int64) (*SQLite, error) {
	q := url.Values{}
	// wal_autocheckpoint(0): the committing connection would otherwise run
	// a checkpoint (copying the WAL into the database and fsyncing it)
	// inside the commit of whichever needs_review answer crossed the
	// threshold, which showed up as 100+ ms p99 spikes. The checkpointer
	// goroutine does that work beside the writer instead. No foreign_keys:
	// no table has a foreign key since migration 0010 (the store deletes an
	// item's rule rows itself), and none of the migrations before it
	// depends on enforcement (TestSQLiteForeignKeysMatchTheSchema).
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "wal_autocheckpoint(0)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + file + "?" + q.Encode()
	// The store holds request content (inputs, bodies, outputs): a new
	// database file is the owner's alone (0600, as the audit file and the
	// spool), and SQLite gives its -wal and -shm files the database's
	// mode. SQLite itself would create it 0644 under the usual umask. An
	// existing file this process's user owns is made the owner's alone too
	// (older versions created it 0644), with any -wal and -shm a previous
	// run left; the -wal and -shm created later take the database's mode.
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		// SQLite would say only "unable to open database file (14)":
		// the file system's reason (permission denied, a read-only file
		// system, no such directory) tells the operator what to fix.
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	f.Close()
	for _, f := range []string{file, file + "-wal", file + "-shm"} {
		privateMode(f, euid())
	}
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	if err := migrateRetrying(ctx, w); err != nil {
		w.Close()
		var le *SchemaLevelError
		if errors.As(err, &le) {
			le.Store = "review store " + file
			return nil, le
		}
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	insItem, err := w.PrepareContext(ctx, sqlInsertItem)
	if err != nil {
		db.Close()
		w.Close()
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	insRule, err := w.PrepareContext(ctx, sqlInsertRule)
	if err != nil {
		db.Close()
		w.Close()
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	recentDedupe, err := db.PrepareContext(ctx, sqlRecentDedupe)
	if err != nil {
		insItem.Close()
		insRule.Close()
		db.Close()
		w.Close()
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	var pageSize int64
	if err := w.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		insItem.Close()
		insRule.Close()
		recentDedupe.Close()
		db.Close()
		w.Close()
		return nil, fmt.Errorf("review store %s: %w", file, err)
	}
	s := &SQLite{db: db, w: w, insItem: insItem, insRule: insRule, recentDedupe: recentDedupe, closed: make(chan struct{}), ckptDone: make(chan struct{}),
		file: file, pageSize: pageSize, restartAt: restartAt, retentionBatch: retentionBatch, exportPage: exportPage}
	s.batch = newBatcherBetween(1, 30*time.Second, s.insertAll, s.between)
	go s.checkpointer(every)
	return s, nil
}

// checkpointEvery is how often the WAL is copied into the database. A
// PASSIVE checkpoint never waits for the writer or readers, but what it
// copies and fsyncs shares the machine with them: once a second, at 400
// needs_review answers a second, a checkpoint copied a few MB and the
// answers committing beside it waited up to 10-20 ms (p99 +10 ms over no
// store); every 100 ms each copies a tenth of that and the p99 added fell
// to under 1 ms (docs/benchmarks.md). An idle store's checkpoint finds
// nothing to copy and returns at once.
const checkpointEvery = 100 * time.Millisecond

// walRestartAt bounds the WAL. SQLite starts writing it from the start
// again only when a write transaction begins with every frame copied, and
// a checkpoint beside a steady stream of commits almost never ends so: the
// WAL grew by 24 MB/s at 400 items/s (180 MB in a 7 s run) and never
// started over. Past this size the checkpointer chases the writer with
// checkpoints back to back, and if the WAL has not started over within
// walRestartOverdue the writer finishes the copy between two batches
// (between).
const walRestartAt = 64 << 20

// walRestartOverdue: how long the checkpointer tries alone before it asks
// the writer, and how long a writer that is never idle waits for an idle
// moment before it finishes the copy after a batch anyway.
const walRestartOverdue = time.Second

// WAL layout (sqlite.org/fileformat.html): a 32-byte header, then frames of
// a 24-byte header and a page.
const walHeader, walFrameHeader = 32, 24

func (s *SQLite) checkpointer(every time.Duration) {
	defer close(s.ckptDone)
	wal := walSpace{path: s.file + "-wal"}
	defer wal.close()
	t := time.NewTicker(every)
	defer t.Stop()
	var chased, asked, over time.Time // over: since when the WAL is past restartAt
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
			frames, err := s.checkpoint()
			if err != nil {
				continue // transient (a busy database); the next tick retries
			}
			end := walHeader + frames*(s.pageSize+walFrameHeader)
			wal.reserve(end)
			if end <= s.restartAt {
				over = time.Time{}
				continue
			}
			if over.IsZero() {
				over = time.Now()
			}
			// At most once a second each (every extra checkpoint costs
			// fsyncs, and a reader holding an old snapshot also keeps
			// the WAL from starting over): first checkpoints back to
			// back, each copying only what commits added during the one
			// before. Once one ends with no commit beside it (it then
			// also fsynced the database) the next commit starts the WAL
			// over, and no item waited for that.
			if time.Since(chased) > walRestartOverdue {
				chased = time.Now()
				for range 3 {
					if _, err := s.checkpoint(); err != nil {
						break
					}
				}
			}
			// Commits that never leave such a gap: the writer finishes
			// the copy between two batches, which delays the items
			// arriving meanwhile (2-13 ms measured).
			if time.Since(over) > walRestartOverdue && time.Since(asked) > walRestartOverdue {
				asked = time.Now()
				s.restartAsked.CompareAndSwap(0, asked.UnixNano())
			}
		}
	}
}

// checkpoint runs a PASSIVE checkpoint on a reader connection and gives
// the frames the WAL held.
func (s *SQLite) checkpoint() (frames int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var busy, copied int64
	err = s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	return frames, err
}

// between runs in the writer goroutine between batches (batcher). Asked
// by the checkpointer, it checkpoints on the writer's connection: no
// commit can land meanwhile, so every frame is copied and the next commit
// starts the WAL over. It waits for an idle moment (an item arriving now
// waits for the copy of what the last 100 ms added and two fsyncs) unless
// it has waited walRestartOverdue.
func (s *SQLite) between(idle bool) {
	at := s.restartAsked.Load()
	if at == 0 || !idle && time.Since(time.Unix(0, at)) < walRestartOverdue {
		return
	}
	s.restartAsked.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Errors are transient; the checkpointer asks again.
	_, _ = s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
}

// migrateRetrying runs the migrations, trying again while SQLite answers
// SQLITE_BUSY. Processes opening one file at the same moment (replicas on
// one host, a restart overlapping the old process) meet locks that SQLite
// reports at once rather than through its busy handler, such as another
// connection switching the file to WAL or reading the schema it changes.
func migrateRetrying(ctx context.Context, w *sql.DB) error {
	deadline := time.Now().Add(migrateBusyFor)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := migrate(ctx, w, sqliteMigrations, "migrations/sqlite")
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// migrateBusyFor bounds how long opening waits for another process's
// migrations.
const migrateBusyFor = 30 * time.Second

// migrate applies the embedded migrations not yet recorded, each in its own
// transaction with the version row, so a second process starting at the
// same moment waits for the lock and then finds the version applied.
func migrate(ctx context.Context, db *sql.DB, fsys embed.FS, dir string) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_ns INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	ms, err := migrations(fsys, dir)
	if err != nil {
		return err
	}
	var have, applied int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0), count(*) FROM schema_migrations`).Scan(&have, &applied); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := newerLevel(have, applied, ms); err != nil {
		return err
	}
	for _, m := range ms {
		v, base, body := m.version, m.name, m.body
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, v).Scan(&n); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if n > 0 {
			tx.Rollback()
			continue
		}
		if _, err := tx.ExecContext(ctx, body); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_ns) VALUES (?, ?)`, v, time.Now().UnixNano()); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
	}
	return nil
}

// Close closes the database.
func (s *SQLite) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.batch.close()
		close(s.closed)
		<-s.ckptDone
		errs := []error{s.insItem.Close(), s.insRule.Close(), s.recentDedupe.Close()}
		for _, st := range s.itemStmts {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
		err = errors.Join(append(errs, s.db.Close(), s.w.Close())...)
	})
	return err
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func nullTime(ns sql.NullInt64) *time.Time {
	if !ns.Valid {
		return nil
	}
	t := time.Unix(0, ns.Int64).UTC()
	return &t
}

const (
	sqlInsertItem = `INSERT INTO reviews (id, status, created_ns, route, prompt_name, prompt_sha,
		contract_name, contract_sha, key_id, input, request, attempts, dedupe_key, dedupe_until_ns, dedupe_answer)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING`
	// sqlRecentDedupe reads reviews_status once per status from since on
	// and merges the three in creation order (migration 0009 dropped the
	// index by creation time alone; TestSQLiteOtherPlans).
	sqlRecentDedupe = `SELECT ` + dedupeColumns + ` FROM reviews
		WHERE status = 'pending' AND created_ns >= ?1 AND dedupe_key IS NOT NULL AND dedupe_until_ns > ?2
		UNION ALL SELECT ` + dedupeColumns + ` FROM reviews
		WHERE status = 'approved' AND created_ns >= ?1 AND dedupe_key IS NOT NULL AND dedupe_until_ns > ?2
		UNION ALL SELECT ` + dedupeColumns + ` FROM reviews
		WHERE status = 'rejected' AND created_ns >= ?1 AND dedupe_key IS NOT NULL AND dedupe_until_ns > ?2
		ORDER BY created_ns, id LIMIT ?3`
	sqlInsertRule = `INSERT INTO review_rules (review_id, rule, created_ns, status, route, contract_name) VALUES (?,?,?,'pending',?,?) ON CONFLICT DO NOTHING`
	// sqlResolveRule moves one rule row of an item to its new status, by
	// the row's key (review_rules is keyed in the rule filter's order).
	sqlResolveRule = `UPDATE review_rules SET status = ? WHERE rule = ? AND status = ? AND created_ns = ? AND review_id = ?`
	// sqlDeleteRule deletes one rule row, by its key.
	sqlDeleteRule = `DELETE FROM review_rules WHERE rule = ? AND status = ? AND created_ns = ? AND review_id = ?`

	// The multi-row insert (execRows): head, then one row per item. OR
	// IGNORE rather than ON CONFLICT: a multi-row statement that may abort
	// half way needs a statement journal, a temporary file written for
	// every page it touches. A row ignored for any reason shows in the
	// count, and insertEach then stores the batch with sqlInsertItem,
	// which reports a real error. Documents come as bytes cast to TEXT:
	// stored as before, without a Go string copy of each first.
	sqlInsertItems = `INSERT OR IGNORE INTO reviews (id, status, created_ns, route, prompt_name, prompt_sha,
		contract_name, contract_sha, key_id, input, request, attempts, dedupe_key, dedupe_until_ns, dedupe_answer) VALUES `
	sqlItemRow = `(?,'pending',?,?,?,?,?,?,?,CAST(? AS TEXT),CAST(? AS TEXT),CAST(? AS TEXT),?,?,CAST(? AS TEXT))`
)

// Create hands the item to the writer goroutine (group commit, see
// batcher) and returns once the transaction holding it committed.
func (s *SQLite) Create(ctx context.Context, it *Item, webhook bool) (bool, error) {
	return s.batch.create(ctx, it, webhook)
}

// insertAll stores a batch in one transaction: its items with a few
// multi-row INSERTs (execRows) rather than one statement each. When some
// id already existed (a spooled item moved in twice, a retry after a
// timeout) the count tells, and the batch is stored again item by item to
// learn which.
func (s *SQLite) insertAll(ctx context.Context, batch []createReq) ([]bool, error) {
	created, ok, err := s.insertRows(ctx, batch)
	if err != nil || ok {
		return created, err
	}
	return s.insertEach(ctx, batch)
}

// insertRows is insertAll's fast path; ok is false (and nothing stored)
// when not every item was new.
//
// Only BEGIN IMMEDIATE (which waits for the write lock) and COMMIT run
// under ctx. The statements between them wait for nothing once the lock
// is held, and a context that can end makes the driver start a watcher
// goroutine and install a progress handler for every statement (8 of the
// 96 allocations of an item stored alone); they run under
// context.Background(). An error still rolls the whole batch back.
func (s *SQLite) insertRows(ctx context.Context, batch []createReq) (created []bool, ok bool, err error) {
	created = make([]bool, len(batch))
	var items, rules []any
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, r := range batch {
		it := r.it
		for _, o := range batch[:i] {
			if o.it.ID == it.ID {
				return created, false, nil // the later copy is not new
			}
		}
		buf.Reset()
		if err := enc.Encode(nonNilAttempts(it.Attempts)); err != nil {
			return created, false, err
		}
		atts := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		ts := it.CreatedAt.UnixNano()
		var dk, duntil, dans any // NULL: no dedupe window
		if d := it.Dedupe; d != nil && d.Key != "" {
			dk, duntil, dans = d.Key, d.Until.UnixNano(), []byte(d.Answer)
		}
		items = append(items, it.ID, ts, it.Route, it.Prompt.Name, it.Prompt.SHA256, it.Contract.Name, it.Contract.SHA256,
			it.KeyID, []byte(orNull(it.Input)), []byte(orNull(it.Request)), bytes.Clone(atts), dk, duntil, dans)
		for _, rule := range it.Rules() {
			rules = append(rules, it.ID, rule, ts, it.Route, it.Contract.Name) // sqlInsertRule's order
		}
	}
	// Prepared before the transaction: it holds the writer's one connection.
	if err := s.prepareRows(ctx, &s.itemStmts, sqlInsertItems, sqlItemRow, len(batch)); err != nil {
		return created, false, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return created, false, err
	}
	defer tx.Rollback()
	bg := context.Background() // see above: the lock is held
	n, err := s.execRows(bg, tx, &s.itemStmts, sqlItemRow, items)
	if err != nil {
		return created, false, err
	}
	if n != len(batch) {
		return created, false, nil
	}
	// Rule rows one by one, with ON CONFLICT DO NOTHING (a repeated rule
	// row is no error): a multi-row insert that may abort half way (a NOT
	// NULL constraint) needs a statement journal, a temporary file
	// written per page touched.
	ins := tx.StmtContext(bg, s.insRule)
	for i := 0; i < len(rules); i += 5 {
		if _, err := ins.ExecContext(bg, rules[i:i+5]...); err != nil {
			return created, false, err
		}
	}
	for _, r := range batch {
		if r.webhook {
			cp := *r.it
			cp.Status, cp.ResolvedAt, cp.Resolution = StatusPending, nil, nil
			if err := s.enqueue(bg, tx, EventCreated, &cp); err != nil {
				return created, false, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return created, false, err
	}
	for i := range created {
		created[i] = true
	}
	return created, true, nil
}

// rowChunks calls fn with the sizes, as powers of two (1 << k rows, k
// at most 7), that execRows splits rows into, largest first.
func rowChunks(rows int, fn func(k, n int) error) error {
	for rows > 0 {
		k := min(bits.Len(uint(rows))-1, 7)
		if err := fn(k, 1<<k); err != nil {
			return err
		}
		rows -= 1 << k
	}
	return nil
}

// prepareRows prepares the multi-row statements (head, then n times row)
// that rows rows need and stmts does not hold yet. Only the writer
// goroutine uses them.
func (s *SQLite) prepareRows(ctx context.Context, stmts *[8]*sql.Stmt, head, row string, rows int) error {
	return rowChunks(rows, func(k, n int) error {
		if stmts[k] != nil {
			return nil
		}
		st, err := s.w.PrepareContext(ctx, head+strings.Repeat(row+",", n-1)+row)
		stmts[k] = st
		return err
	})
}

// execRows inserts args, a row's worth (the placeholders of row) a row,
// with the statements prepareRows prepared, and gives the rows inserted.
func (s *SQLite) execRows(ctx context.Context, tx *sql.Tx, stmts *[8]*sql.Stmt, row string, args []any) (int, error) {
	params, total := strings.Count(row, "?"), 0
	err := rowChunks(len(args)/params, func(k, n int) error {
		res, err := tx.StmtContext(ctx, stmts[k]).ExecContext(ctx, args[:n*params]...)
		if err != nil {
			return err
		}
		args = args[n*params:]
		c, _ := res.RowsAffected()
		total += int(c)
		return nil
	})
	return total, err
}

// insertEach stores a batch item by item in one transaction, reporting
// which ids were new.
func (s *SQLite) insertEach(ctx context.Context, batch []createReq) ([]bool, error) {
	created := make([]bool, len(batch))
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return created, err
	}
	defer tx.Rollback()
	for i, r := range batch {
		if created[i], err = s.insert(ctx, tx, r.it, r.webhook); err != nil {
			return make([]bool, len(batch)), err
		}
	}
	if err := tx.Commit(); err != nil {
		return make([]bool, len(batch)), err
	}
	return created, nil
}

func (s *SQLite) insert(ctx context.Context, tx *sql.Tx, it *Item, webhook bool) (bool, error) {
	atts, err := json.Marshal(nonNilAttempts(it.Attempts))
	if err != nil {
		return false, err
	}
	input := it.Input
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	req := it.Request
	if len(req) == 0 {
		req = json.RawMessage("null")
	}
	created := it.CreatedAt.UnixNano()
	var dk, dans sql.NullString
	var duntil sql.NullInt64
	if d := it.Dedupe; d != nil && d.Key != "" {
		dk = sql.NullString{String: d.Key, Valid: true}
		duntil = sql.NullInt64{Int64: d.Until.UnixNano(), Valid: true}
		dans = sql.NullString{String: string(d.Answer), Valid: true}
	}
	res, err := tx.StmtContext(ctx, s.insItem).ExecContext(ctx,
		it.ID, string(StatusPending), created, it.Route, it.Prompt.Name, it.Prompt.SHA256, it.Contract.Name, it.Contract.SHA256,
		it.KeyID, string(input), string(req), string(atts), dk, duntil, dans)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	ins := tx.StmtContext(ctx, s.insRule)
	for _, r := range it.Rules() {
		if _, err := ins.ExecContext(ctx, it.ID, r, created, it.Route, it.Contract.Name); err != nil {
			return false, err
		}
	}
	if webhook {
		cp := *it
		cp.Status, cp.ResolvedAt, cp.Resolution = StatusPending, nil, nil
		if err := s.enqueue(ctx, tx, EventCreated, &cp); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (s *SQLite) enqueue(ctx context.Context, tx *sql.Tx, typ WebhookEvent, it *Item) error {
	now := time.Now().UnixNano()
	_, err := tx.ExecContext(ctx, `INSERT INTO webhook_outbox (id, type, review_id, body, created_ns, next_ns) VALUES (?,?,?,?,?,?)`,
		newID(), typ, it.ID, WebhookBody(typ, it), now, now)
	return err
}

func nonNilAttempts(a []Attempt) []Attempt {
	if a == nil {
		return []Attempt{}
	}
	return a
}

const itemColumns = `id, status, created_ns, resolved_ns, route, prompt_name, prompt_sha, contract_name, contract_sha, key_id, input, attempts, resolution`

type scanner interface{ Scan(...any) error }

func scanItem(sc scanner, withRequest bool) (*Item, error) {
	var (
		it               Item
		status           string
		created          int64
		resolved         sql.NullInt64
		input, atts, req string
		resolution       sql.NullString
	)
	dest := []any{&it.ID, &status, &created, &resolved, &it.Route, &it.Prompt.Name, &it.Prompt.SHA256,
		&it.Contract.Name, &it.Contract.SHA256, &it.KeyID, &input, &atts, &resolution}
	if withRequest {
		dest = append(dest, &req)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	it.Status = Status(status)
	it.CreatedAt = time.Unix(0, created).UTC()
	it.ResolvedAt = nullTime(resolved)
	it.Input = json.RawMessage(input)
	if withRequest {
		it.Request = json.RawMessage(req)
	}
	if err := json.Unmarshal([]byte(atts), &it.Attempts); err != nil {
		return nil, fmt.Errorf("item %s: attempts: %w", it.ID, err)
	}
	if resolution.Valid {
		it.Resolution = &Resolution{}
		if err := json.Unmarshal([]byte(resolution.String), it.Resolution); err != nil {
			return nil, fmt.Errorf("item %s: resolution: %w", it.ID, err)
		}
	}
	return &it, nil
}

func (s *SQLite) Get(ctx context.Context, id string) (*Item, error) {
	return getItem(ctx, s.db, id)
}

type queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func getItem(ctx context.Context, q queryer, id string) (*Item, error) {
	it, err := scanItem(q.QueryRowContext(ctx, `SELECT `+itemColumns+`, request FROM reviews WHERE id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return it, err
}

func (s *SQLite) List(ctx context.Context, f Filter) ([]*Item, string, error) {
	if err := CheckFilter(&f); err != nil {
		return nil, "", err
	}
	q, args, err := listQuery(f)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	return listItems(rows, f.Limit)
}

// listQuery is List's SQL for a checked filter: every combination of
// filters is served by an index in newest-first order (TestSQLiteListPlans).
// Without a status (and without a contract alone, which reviews_contract
// serves), it reads the index that also holds the status once per status
// and merges the three reads in order (a compound SELECT: SQLite merges
// its arms, each read in its index's order, and stops at the limit): an
// index by creation time, route or rule without the status would be one
// more b-tree every new item is written into (migration 0009).
func listQuery(f Filter) (string, []any, error) {
	var ns int64
	var id string
	if f.Cursor != "" {
		var err error
		if ns, id, err = decodeCursor(f.Cursor); err != nil {
			return "", nil, err
		}
	}
	var q string
	var args []any
	if f.Status == "" && (f.Rule != "" || f.Contract == "") {
		for i, st := range []Status{StatusPending, StatusApproved, StatusRejected} {
			g := f
			g.Status = st
			arm, a := listSelect(g, ns, id)
			if i > 0 {
				q += ` UNION ALL `
			}
			q += arm
			args = append(args, a...)
		}
	} else {
		q, args = listSelect(f, ns, id)
	}
	q += ` ORDER BY created_ns DESC, id DESC LIMIT ?`
	args = append(args, f.Limit+1)
	return q, args, nil
}

// listSelect is listQuery's SELECT for one reading of an index, without
// its order and limit; with a cursor, the items after (ns, id).
func listSelect(f Filter, ns int64, id string) (string, []any) {
	var where []string
	var args []any
	from := `reviews r`
	// The newest-first order and the cursor use these columns, selected
	// as id and created_ns.
	order := [2]string{"r.created_ns", "r.id"}
	col := func(c string) string { return "r." + c }
	if f.Rule != "" {
		// Drive the query from the rule index in its own order (CROSS JOIN
		// keeps SQLite from starting at reviews); x's created_ns and
		// review_id equal r's, but only x's order comes without a sort.
		// The other filters read x's copies, so only matches touch r.
		from = `review_rules x CROSS JOIN reviews r ON r.id = x.review_id`
		order = [2]string{"x.created_ns", "x.review_id"}
		col = func(c string) string { return "x." + c }
		where = append(where, `x.rule = ?`)
		args = append(args, f.Rule)
	}
	if f.Status != "" {
		where = append(where, col("status")+` = ?`)
		args = append(args, string(f.Status))
	}
	if f.Route != "" {
		where = append(where, col("route")+` = ?`)
		args = append(args, f.Route)
	}
	if f.Contract != "" {
		where = append(where, col("contract_name")+` = ?`)
		args = append(args, f.Contract)
	}
	if f.Cursor != "" {
		// A row value, not (a < ? OR (a = ? AND b < ?)): SQLite seeks the
		// index to a row value but reads the OR form from the newest
		// entry on, so a page deep in a million items read all before it.
		where = append(where, `(`+order[0]+`, `+order[1]+`) < (?, ?)`)
		args = append(args, ns, id)
	}
	cols := strings.Split(itemColumns, ", ")
	for i, c := range cols {
		switch c {
		case "id":
			cols[i] = order[1] + ` AS id`
		case "created_ns":
			cols[i] = order[0] + ` AS created_ns`
		default:
			cols[i] = "r." + c
		}
	}
	q := `SELECT ` + strings.Join(cols, ", ") + ` FROM ` + from
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q, args
}

func (s *SQLite) Resolve(ctx context.Context, id string, r Resolve) (*Item, error) {
	if r.Status != StatusApproved && r.Status != StatusRejected {
		return nil, fmt.Errorf("resolve %s: status must be approved or rejected, not %q", id, r.Status)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := json.Marshal(r.Resolution)
	if err != nil {
		return nil, err
	}
	if len(r.Attempts) > 0 {
		if _, err := s.appendTx(ctx, tx, id, r.Attempts); err != nil {
			return nil, err
		}
	}
	// The conditional update is what makes exactly one resolution win.
	out, err := tx.ExecContext(ctx, `UPDATE reviews SET status = ?, resolved_ns = ?, resolution = ? WHERE id = ? AND status = ?`,
		string(r.Status), r.At.UnixNano(), string(res), id, string(StatusPending))
	if err != nil {
		return nil, err
	}
	if n, _ := out.RowsAffected(); n == 0 {
		return nil, missingOrResolved(tx.QueryRowContext(ctx, `SELECT count(*) FROM reviews WHERE id = ?`, id))
	}
	it, err := getItem(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	// The item's rule rows, found by their key (migration 0010): one for
	// each rule of its attempts, as Create and AppendAttempts wrote them.
	for _, rule := range it.Rules() {
		if _, err := tx.ExecContext(ctx, sqlResolveRule, string(r.Status), rule, string(StatusPending), it.CreatedAt.UnixNano(), id); err != nil {
			return nil, err
		}
	}
	if r.Webhook {
		if err := s.enqueue(ctx, tx, EventResolved, it); err != nil {
			return nil, err
		}
	}
	return it, tx.Commit()
}

func (s *SQLite) appendTx(ctx context.Context, tx *sql.Tx, id string, atts []Attempt) (*Item, error) {
	var status, cur, route, contract string
	var created int64
	err := tx.QueryRowContext(ctx, `SELECT status, attempts, created_ns, route, contract_name FROM reviews WHERE id = ?`, id).Scan(&status, &cur, &created, &route, &contract)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	b, newRules, err := mergeAttempts(status, cur, atts)
	if err != nil {
		return nil, err
	}
	out, err := tx.ExecContext(ctx, `UPDATE reviews SET attempts = ? WHERE id = ? AND status = ?`, string(b), id, string(StatusPending))
	if err != nil {
		return nil, err
	}
	if n, _ := out.RowsAffected(); n == 0 {
		return nil, ErrAlreadyResolved
	}
	for _, r := range newRules {
		if _, err := tx.ExecContext(ctx, sqlInsertRule, id, r, created, route, contract); err != nil {
			return nil, err
		}
	}
	return getItem(ctx, tx, id)
}

func (s *SQLite) AppendAttempts(ctx context.Context, id string, atts []Attempt) (*Item, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	it, err := s.appendTx(ctx, tx, id, atts)
	if err != nil {
		return nil, err
	}
	return it, tx.Commit()
}

// Export reads exportPage items per query and calls fn only after each
// page's query ended: a read transaction held across the whole export
// (every callback waiting on a slow client) kept the checkpointer from
// copying anything committed after it began, so the WAL grew for as long
// as the export lasted (TestSQLiteExportHoldsNoSnapshot). Each page goes
// on from the last item's (resolution time, id), the order's key: an item
// resolved before the export began is exported exactly once; one resolved
// or deleted by retention meanwhile may or may not be.
func (s *SQLite) Export(ctx context.Context, f ExportFilter, fn func(*Item) error) error {
	return sqliteExport(ctx, s.db, s.exportPage, f, fn)
}

// sqliteExport is Export on db (the store's readers, or a reader's).
func sqliteExport(ctx context.Context, db *sql.DB, page int, f ExportFilter, fn func(*Item) error) error {
	return exportPages(f, page, func(c *exportCursor) ([]*Item, error) {
		q, args := exportQuery(f, c, page)
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return collectItems(rows, page)
	}, fn)
}

// exportQuery is Export's SQL for one page after c (nil: the first). With
// a status (export is for resolved items) it reads one index in its order
// (TestSQLiteOtherPlans): a resolved item's resolution time is resolved_ns
// (reviews_status_done holds resolved items only), a pending item's is
// created_ns (reviews_status).
func exportQuery(f ExportFilter, c *exportCursor, limit int) (string, []any) {
	at := `COALESCE(resolved_ns, created_ns)`
	var where []string
	var args []any
	switch f.Status {
	case "":
	case StatusPending:
		at = `created_ns`
		where = append(where, `status = ?`)
		args = append(args, string(f.Status))
	default:
		at = `resolved_ns`
		where = append(where, `status = ?`, `resolved_ns IS NOT NULL`)
		args = append(args, string(f.Status))
	}
	if f.Route != "" {
		where = append(where, `route = ?`)
		args = append(args, f.Route)
	}
	if !f.Since.IsZero() {
		where = append(where, at+` >= ?`)
		args = append(args, f.Since.UnixNano())
	}
	if c != nil {
		where = append(where, `(`+at+`, id) < (?, ?)`)
		args = append(args, c.at, c.id)
	}
	q := `SELECT ` + itemColumns + ` FROM reviews`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY ` + at + ` DESC, id DESC LIMIT ?`
	args = append(args, limit)
	return q, args
}

func (s *SQLite) Pending(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT route, count(*) FROM reviews WHERE status = ? GROUP BY route`, string(StatusPending))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanPending(rows)
}

// DeleteResolvedBefore deletes in batches of retentionBatch items, each its
// own transaction on the writer connection: a needs_review answer arriving
// during a pass waits for one batch (a few ms), not for the whole pass.
// One DELETE of every expired item held the write lock throughout: at 36,000
// items a Create waited 1.7 s of a 2.7 s pass, and at a million the pass
// takes a minute, long past the 5 s after which an item is spooled
// (docs/benchmarks.md, session 10). Between batches database/sql hands the
// connection to a waiting writer first. Batches already committed stay
// deleted when ctx ends or a batch fails; the next pass goes on from there.
//
// An item whose attempts cannot be decoded (a damaged row) is deleted like
// the others, its rule rows found without its rules (sqlDeleteRulesOfItem),
// and the pass goes on; it returns a *DamagedItemsError naming such items
// with the count of every item deleted. One such item failed its whole
// batch, and as the oldest it was in the first batch of every pass: no
// resolved item was deleted again.
func (s *SQLite) DeleteResolvedBefore(ctx context.Context, t time.Time) (int, error) {
	var damaged []string
	n, err := resolvedInBatches(s.retentionBatch, func(st Status) (int, error) {
		return s.retentionBatchTx(ctx, st, t.UnixNano(), &damaged)
	})
	if err == nil && len(damaged) > 0 {
		err = &DamagedItemsError{IDs: damaged}
	}
	return n, err
}

// DamagedItemsError is DeleteResolvedBefore's report of the items it
// deleted whose attempts could not be decoded: the pass itself succeeded.
type DamagedItemsError struct {
	IDs []string
}

func (e *DamagedItemsError) Error() string {
	return fmt.Sprintf("retention deleted %d item(s) whose attempts could not be decoded: %s",
		len(e.IDs), strings.Join(e.IDs[:min(len(e.IDs), 10)], ", "))
}

// retentionBatchTx deletes one batch of a resolved status's expired items
// and their rule rows in one transaction on the writer. review_rules has
// no foreign key to cascade from (migration 0010): each item's rule rows
// are deleted by their key, the item's rules read from the attempts the
// DELETE returns; the ids of items whose attempts do not decode are added
// to damaged.
func (s *SQLite) retentionBatchTx(ctx context.Context, st Status, before int64, damaged *[]string) (int, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, sqlRetention+` RETURNING id, created_ns, attempts`, string(st), before, s.retentionBatch)
	if err != nil {
		return 0, err
	}
	type gone struct {
		id      string
		created int64
		rules   []string
		damaged bool // attempts not decoded: rules unknown
	}
	var items []gone
	for rows.Next() {
		var g gone
		var atts []byte
		if err := rows.Scan(&g.id, &g.created, &atts); err != nil {
			rows.Close()
			return 0, err
		}
		var as []Attempt
		if err := json.Unmarshal(atts, &as); err != nil {
			g.damaged = true
		} else {
			g.rules = rulesOf(as, nil)
		}
		items = append(items, g)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	// One statement for every rule row of the batch (about a thousand for
	// 500 items of two rules), parsed once rather than per row.
	del, err := tx.PrepareContext(ctx, sqlDeleteRule)
	if err != nil {
		return 0, err
	}
	defer del.Close()
	var bad []string
	for _, g := range items {
		if g.damaged {
			if _, err := tx.ExecContext(ctx, sqlDeleteRulesOfItem, string(st), g.created, g.id); err != nil {
				return 0, err
			}
			bad = append(bad, g.id)
			continue
		}
		for _, rule := range g.rules {
			if _, err := del.ExecContext(ctx, rule, string(st), g.created, g.id); err != nil {
				return 0, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	*damaged = append(*damaged, bad...)
	return len(items), nil
}

// sqlDeleteRulesOfItem deletes an item's rule rows without knowing its
// rules (its attempts did not decode): each distinct rule of the table is
// found by a seek past the one before (a loose index scan of the primary
// key), and the item's row under each is deleted by its full key, so the
// cost is a few seeks per rule in use, not a scan of every rule row.
const sqlDeleteRulesOfItem = `WITH RECURSIVE rules(rule) AS (
		SELECT (SELECT min(rule) FROM review_rules)
		UNION ALL
		SELECT (SELECT min(rule) FROM review_rules WHERE rule > rules.rule) FROM rules WHERE rules.rule IS NOT NULL)
	DELETE FROM review_rules WHERE rule IN (SELECT rule FROM rules WHERE rule IS NOT NULL)
		AND status = ? AND created_ns = ? AND review_id = ?`

// deleteBatch runs one batch's DELETE, its own transaction on the writer,
// and returns the rows it deleted.
func (s *SQLite) deleteBatch(ctx context.Context, query string, args ...any) (int, error) {
	res, err := s.w.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// retentionBatch is how many items one retention transaction deletes: at
// 500 (with their rule rows and index entries) a batch holds the write
// lock for a few ms on a loaded 2-core machine.
const retentionBatch = 500

// sqlRetention deletes one batch of a resolved status's expired items,
// oldest first, found by reviews_status_done in its order
// (TestSQLiteOtherPlans).
const sqlRetention = `DELETE FROM reviews WHERE rowid IN (SELECT rowid FROM reviews
	WHERE status = ? AND resolved_ns < ?
	ORDER BY resolved_ns, id LIMIT ?)`

// DeleteDeliveriesBefore deletes in batches of retentionBatch deliveries,
// each its own transaction on the writer, as DeleteResolvedBefore does.
func (s *SQLite) DeleteDeliveriesBefore(ctx context.Context, t time.Time) (int, error) {
	return inBatches(s.retentionBatch, func() (int, error) {
		return s.deleteBatch(ctx, sqlOutboxPurge, t.UnixNano(), s.retentionBatch)
	})
}

// sqlOutboxPurge deletes one batch of deliveries created before a time,
// oldest first, found by webhook_outbox_created (TestSQLiteOtherPlans).
const sqlOutboxPurge = `DELETE FROM webhook_outbox WHERE rowid IN (SELECT rowid FROM webhook_outbox
	WHERE created_ns < ? ORDER BY created_ns LIMIT ?)`

func (s *SQLite) ClaimDeliveries(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]Delivery, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id, type, review_id, body, created_ns, tries FROM webhook_outbox WHERE next_ns <= ? ORDER BY next_ns LIMIT ?`, now.UnixNano(), limit)
	if err != nil {
		return nil, err
	}
	out, err := scanDeliveries(rows)
	rows.Close()
	if err != nil {
		return nil, err
	}
	for _, d := range out {
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET next_ns = ? WHERE id = ?`, now.Add(lease).UnixNano(), d.ID); err != nil {
			return nil, err
		}
	}
	return out, tx.Commit()
}

func (s *SQLite) FinishDelivery(ctx context.Context, id string, done bool, retryAt time.Time) error {
	var err error
	if done {
		_, err = s.w.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE id = ?`, id)
	} else {
		_, err = s.w.ExecContext(ctx, `UPDATE webhook_outbox SET next_ns = ?, tries = tries + 1 WHERE id = ?`, retryAt.UnixNano(), id)
	}
	return err
}

// RecentDedupe reads reviews_status from since on, once per status
// (sqlRecentDedupe); only items with a key carry a window.
func (s *SQLite) RecentDedupe(ctx context.Context, since, now time.Time, limit int) ([]DedupeRecord, error) {
	rows, err := s.recentDedupe.QueryContext(ctx, since.UnixNano(), now.UnixNano(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanDedupe(rows)
}
