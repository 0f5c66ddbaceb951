package review

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/postgres/*.sql
var postgresMigrations embed.FS

// Postgres is the shared store: every replica reads and writes the same
// items. Resolutions are conditional updates, so of concurrent ones on any
// replicas exactly one wins; webhook deliveries are claimed with FOR UPDATE
// SKIP LOCKED and a lease, so one replica at a time sends each (at least
// once: a lease that runs out makes the delivery due again); each
// resolution is announced with NOTIFY so long-poll waiters on every replica
// wake (see PostgresOptions.Hub).
//
// Create group-commits concurrent items (batcher, pgCreate). Durability is
// PostgreSQL's: Create returns once the transaction holding the item
// committed, which with the server's default synchronous_commit
// means its WAL record is flushed.
type Postgres struct {
	pool    *pgxpool.Pool
	hub     *Hub
	timeout time.Duration
	batch   *batcher
	// retentionBatch: items per retention statement (pgRetentionBatch but
	// in tests).
	retentionBatch int
	exportPage     int // items per export query (exportPage but in tests)

	stop     context.CancelFunc
	listenWG sync.WaitGroup
	once     sync.Once
}

// PostgresOptions tunes OpenPostgres.
type PostgresOptions struct {
	// Hub, when set, is notified of every item resolved by any replica on
	// the same database (LISTEN/NOTIFY on a connection of its own), so a
	// waiter on one replica wakes when another resolves its item.
	Hub *Hub
	// MaxConns bounds the pool when the DSN sets no pool_max_conns
	// (default 16: enough for 16 concurrent needs_review writes).
	MaxConns int32
	// OpTimeout bounds each store call whose context has no deadline
	// (default 10s), so a hung server cannot hold a request forever.
	OpTimeout time.Duration
	// MigrateTimeout bounds the migrations at open (default
	// DefaultMigrateTimeout): waiting for the advisory lock while another
	// replica migrates, then applying what is left. It is not OpTimeout's:
	// a migration that rewrites a table of a million items takes minutes,
	// and a replica waiting for it waits as long.
	MigrateTimeout time.Duration
}

// DefaultMigrateTimeout is PostgresOptions.MigrateTimeout's default. The
// migrations had 3 x OpTimeout (30 s) for the lock wait and every
// migration together, so one that rewrote a large table rolled back at
// every start and never applied.
const DefaultMigrateTimeout = 30 * time.Minute

// notifyChannel carries the ids of resolved items.
const notifyChannel = "contractd_review_resolved"

// migrateLockKey is the advisory lock taken while migrating, so replicas
// starting at the same moment apply each migration once, in turn.
var migrateLockKey = func() int64 {
	h := fnv.New64a()
	h.Write([]byte("contractd review migrations"))
	return int64(h.Sum64())
}()

// Prepared statement names: the hot path's statements are prepared once per
// connection (AfterConnect) rather than parsed per item. Others go through
// pgx's per-connection statement cache.
const (
	stmtCreate = "contractd_review_create"
	stmtGet    = "contractd_review_get"
)

const (
	// One statement, so one round trip and one commit, for every item of a
	// group commit (batcher): the items, their rule rows and the
	// review.created deliveries of those with a webhook body, as arrays
	// unnested in step. It returns the ids it inserted (not those that
	// existed already).
	pgCreate = `WITH v AS (
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::text[])
		AS v (id, created_ns, route, prompt_name, prompt_sha, contract_name, contract_sha, key_id, input, request, attempts,
			dedupe_key, dedupe_until_ns, dedupe_answer)
), ins AS (
	INSERT INTO reviews (id, status, created_ns, route, prompt_name, prompt_sha, contract_name, contract_sha, key_id, input, request, attempts,
		dedupe_key, dedupe_until_ns, dedupe_answer)
	SELECT id, 'pending', created_ns, route, prompt_name, prompt_sha, contract_name, contract_sha, key_id, input, request, attempts,
		dedupe_key, dedupe_until_ns, dedupe_answer FROM v
	ON CONFLICT (id) DO NOTHING RETURNING id, created_ns, route, contract_name
), rules AS (
	INSERT INTO review_rules (review_id, rule, created_ns, status, route, contract_name)
	SELECT ins.id, r.rule, ins.created_ns, 'pending', ins.route, ins.contract_name
	FROM ins JOIN unnest($15::text[], $16::text[]) AS r (review_id, rule) ON r.review_id = ins.id
	ON CONFLICT DO NOTHING
), hook AS (
	INSERT INTO webhook_outbox (id, type, review_id, body, created_ns, next_ns)
	SELECT h.id, 'review.created', ins.id, h.body, $20, $20
	FROM ins JOIN unnest($17::text[], $18::text[], $19::bytea[]) AS h (review_id, id, body) ON h.review_id = ins.id
)
SELECT id FROM ins`
	pgGet = `SELECT ` + itemColumns + `, request FROM reviews WHERE id = $1`
)

// pgWriters is how many group commits may be in flight at once: a batch
// waits for at most one round trip and commit before its own starts, and
// the pool keeps connections for everything else.
const pgWriters = 4

// errDSN is a DSN that does not parse; the error says why, never the DSN.
var errDSN = errors.New("review store: the postgres DSN does not parse")

// dsnError is a DSN parse error without the DSN. pgconn quotes the DSN
// with the password masked where it finds one, which misses key=value
// pairs spaced around "=" ("password = …", which pgx accepts): only the
// reason after the quoted DSN is kept.
func dsnError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return errDSN
	}
	s := pe.Error()
	i := strings.LastIndex(s, "`: ")
	if i < 0 {
		return errDSN
	}
	return fmt.Errorf("%w: %s", errDSN, s[i+len("`: "):])
}

// OpenPostgres connects to dsn, runs the embedded migrations under an
// advisory lock, and (with opts.Hub) starts listening for resolutions.
// Errors never carry the DSN's password.
func OpenPostgres(ctx context.Context, dsn string, opts PostgresOptions) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, dsnError(err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = 16
		if opts.MaxConns > 0 {
			cfg.MaxConns = opts.MaxConns
		}
	}
	if opts.OpTimeout == 0 {
		opts.OpTimeout = 10 * time.Second
	}
	if opts.MigrateTimeout == 0 {
		opts.MigrateTimeout = DefaultMigrateTimeout
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// An unreachable host must not hold serve's start (it spools and
		// retries instead).
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "contractd"
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Prepare(ctx, stmtCreate, pgCreate); err != nil {
			return err
		}
		_, err := c.Prepare(ctx, stmtGet, pgGet)
		return err
	}
	// The statements above name the tables: migrate on a plain connection
	// first, so AfterConnect never prepares against a missing schema.
	if err := migratePostgres(ctx, cfg.ConnConfig.Copy(), opts.MigrateTimeout); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("review store: postgres: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, opts.OpTimeout)
	err = pool.Ping(pctx)
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("review store: postgres: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s := &Postgres{pool: pool, hub: opts.Hub, timeout: opts.OpTimeout, stop: stop, retentionBatch: pgRetentionBatch, exportPage: exportPage}
	s.batch = newBatcher(pgWriters, opts.OpTimeout, s.createAll)
	if s.hub != nil {
		ready := make(chan struct{})
		s.listenWG.Add(1)
		go s.listen(lctx, cfg.ConnConfig.Copy(), ready)
		// Wait (briefly) for LISTEN so a resolution right after Open is
		// heard; a server that is slow to answer only delays waiters.
		select {
		case <-ready:
		case <-time.After(opts.OpTimeout):
		}
	}
	return s, nil
}

// migratePostgres applies the embedded migrations not yet recorded. A
// session advisory lock serialises replicas starting together; each
// migration commits with its version row, so one that fails half way is
// retried whole by the next start. Connecting is bounded by the
// connection's ConnectTimeout (5 s unless the DSN says); waiting for the
// lock and migrating have budget together, so a replica waits for
// another's migration as long as that one may take.
func migratePostgres(ctx context.Context, cc *pgx.ConnConfig, budget time.Duration) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("review store: postgres: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("review store: migration lock: %w", err)
	}
	// Closing the connection releases the lock too; unlock for tidiness.
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS contractd_schema_migrations (
		version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("review store: migrations: %w", err)
	}
	ms, err := migrations(postgresMigrations, "migrations/postgres")
	if err != nil {
		return err
	}
	var have, applied int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0), count(*) FROM contractd_schema_migrations`).Scan(&have, &applied); err != nil {
		return fmt.Errorf("review store: migrations: %w", err)
	}
	if err := newerLevel(have, applied, ms); err != nil {
		var le *SchemaLevelError
		if errors.As(err, &le) {
			le.Store = "review store: postgres"
		}
		return err
	}
	for _, m := range ms {
		v, base, body := m.version, m.name, m.body
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM contractd_schema_migrations WHERE version = $1`, v).Scan(&n); err != nil || n > 0 {
				return err
			}
			// No arguments: the simple protocol runs the file's statements in turn.
			if _, err := tx.Exec(ctx, body); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO contractd_schema_migrations (version) VALUES ($1)`, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("review store: migration %s: %w", base, err)
		}
	}
	return nil
}

// listen holds one connection in LISTEN and hands each resolved id to the
// hub. After every (re)connect it checks the ids being waited for, so a
// resolution made while the connection was down is not missed.
func (s *Postgres) listen(ctx context.Context, cc *pgx.ConnConfig, ready chan struct{}) {
	defer s.listenWG.Done()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err == nil {
			_, err = conn.Exec(ctx, `LISTEN `+notifyChannel)
		}
		if err == nil {
			if ready != nil {
				close(ready)
				ready = nil
			}
			backoff = 100 * time.Millisecond
			s.catchUp(ctx)
			for {
				n, werr := conn.WaitForNotification(ctx)
				if werr != nil {
					break
				}
				s.hub.Notify(n.Payload)
			}
		}
		if conn != nil {
			conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Postgres) catchUp(ctx context.Context) {
	ids := s.hub.IDs()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id FROM reviews WHERE id = ANY($1) AND status <> 'pending'`, ids)
	if err != nil {
		return
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, id := range done {
		s.hub.Notify(id)
	}
}

// Close stops listening and closes the pool.
func (s *Postgres) Close() error {
	s.once.Do(func() {
		s.stop()
		s.listenWG.Wait()
		s.batch.close()
		s.pool.Close()
	})
	return nil
}

// opCtx gives a call without a deadline the store's own.
func (s *Postgres) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return opCtx(ctx, s.timeout)
}

// Create hands the item to a writer (group commit, see batcher) and
// returns once the statement holding it committed.
func (s *Postgres) Create(ctx context.Context, it *Item, webhook bool) (bool, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	return s.batch.create(ctx, it, webhook)
}

// createAll stores a batch with one statement (pgCreate). An id given
// twice in one batch is sent once; the later copies report not created,
// as they would one after the other.
func (s *Postgres) createAll(ctx context.Context, batch []createReq) ([]bool, error) {
	n := len(batch)
	// The text columns of pgCreate's $1..$14 in one allocation, column by
	// column: text[c*n+k] is column c of the k-th item sent.
	const (
		cID = iota
		cRoute
		cPromptName
		cPromptSHA
		cContractName
		cContractSHA
		cKeyID
		cInput
		cRequest
		cAttempts
		nText
	)
	text := make([]string, nText*n)
	created := make([]int64, n)
	sent := make([]int, 0, n) // batch index of the k-th item sent
	dedupe := make([]*string, 2*n)
	duntil := make([]*int64, n)
	var ruleIDs, rules, hookItems, hookIDs []string
	hookBodies := [][]byte{}
	for i, r := range batch {
		it, k := r.it, len(sent)
		if slices.Contains(text[:k], it.ID) {
			continue // sent once; the later copies were not created
		}
		a, err := json.Marshal(nonNilAttempts(it.Attempts))
		if err != nil {
			return nil, err
		}
		for c, v := range [nText]string{it.ID, it.Route, it.Prompt.Name, it.Prompt.SHA256, it.Contract.Name, it.Contract.SHA256,
			it.KeyID, string(orNull(it.Input)), string(orNull(it.Request)), string(a)} {
			text[c*n+k] = v
		}
		created[k] = it.CreatedAt.UnixNano()
		if d := it.Dedupe; d != nil && d.Key != "" { // else NULL: no dedupe window
			u, ans := d.Until.UnixNano(), string(d.Answer)
			dedupe[k], dedupe[n+k], duntil[k] = &d.Key, &ans, &u
		}
		for _, rule := range it.Rules() {
			ruleIDs, rules = append(ruleIDs, it.ID), append(rules, rule)
		}
		if r.webhook {
			cp := *it
			cp.Status, cp.ResolvedAt, cp.Resolution = StatusPending, nil, nil
			hookItems, hookIDs, hookBodies = append(hookItems, it.ID), append(hookIDs, newID()), append(hookBodies, WebhookBody(EventCreated, &cp))
		}
		sent = append(sent, i)
	}
	k := len(sent)
	col := func(c int) []string { return text[c*n : c*n+k] }
	rows, err := s.pool.Query(ctx, stmtCreate, col(cID), created[:k], col(cRoute), col(cPromptName), col(cPromptSHA),
		col(cContractName), col(cContractSHA), col(cKeyID), col(cInput), col(cRequest), col(cAttempts),
		dedupe[:k], duntil[:k], dedupe[n:n+k], orEmpty(ruleIDs), orEmpty(rules), orEmpty(hookItems), orEmpty(hookIDs), hookBodies,
		time.Now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("review store: create: %w", err)
	}
	out := make([]bool, n)
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		out[sent[slices.Index(col(cID), id)]] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("review store: create: %w", err)
	}
	return out, nil
}

// orEmpty sends an empty array rather than NULL.
func orEmpty(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func (s *Postgres) Get(ctx context.Context, id string) (*Item, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	return pgGetItem(ctx, s.pool, stmtGet, id)
}

type pgQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func pgGetItem(ctx context.Context, q pgQuerier, sql, id string) (*Item, error) {
	it, err := scanItem(q.QueryRow(ctx, sql, id), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("review store: get %s: %w", id, err)
	}
	return it, nil
}

// args numbers placeholders as they are added.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

func (s *Postgres) List(ctx context.Context, f Filter) ([]*Item, string, error) {
	if err := CheckFilter(&f); err != nil {
		return nil, "", err
	}
	q, a, err := pgListQuery(f)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, "", fmt.Errorf("review store: list: %w", err)
	}
	defer rows.Close()
	items, next, err := listItems(rows, f.Limit)
	if err != nil {
		return nil, "", fmt.Errorf("review store: list: %w", err)
	}
	return items, next, nil
}

// pgListQuery is List's SQL for a checked filter. With a rule the query is
// driven by review_rules, whose rows carry the status, route and contract,
// in its own newest-first order; otherwise by the reviews index of the
// filters given (TestPostgresListPlans).
func pgListQuery(f Filter) (string, []any, error) {
	var where []string
	var a args
	from := `reviews r`
	t := "r"
	order := [2]string{"r.created_ns", "r.id"}
	if f.Rule != "" {
		from = `review_rules x JOIN reviews r ON r.id = x.review_id`
		t = "x"
		order = [2]string{"x.created_ns", "x.review_id"}
		where = append(where, `x.rule = `+a.add(f.Rule))
	}
	if f.Status != "" {
		where = append(where, t+`.status = `+a.add(string(f.Status)))
	}
	if f.Route != "" {
		where = append(where, t+`.route = `+a.add(f.Route))
	}
	if f.Contract != "" {
		where = append(where, t+`.contract_name = `+a.add(f.Contract))
	}
	if f.Cursor != "" {
		ns, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return "", nil, err
		}
		where = append(where, `(`+order[0]+`, `+order[1]+`) < (`+a.add(ns)+`, `+a.add(id)+`)`)
	}
	q := `SELECT r.` + strings.ReplaceAll(itemColumns, ", ", ", r.") + ` FROM ` + from
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY ` + order[0] + ` DESC, ` + order[1] + ` DESC LIMIT ` + a.add(f.Limit+1)
	return q, a, nil
}

func (s *Postgres) Resolve(ctx context.Context, id string, r Resolve) (*Item, error) {
	if r.Status != StatusApproved && r.Status != StatusRejected {
		return nil, fmt.Errorf("resolve %s: status must be approved or rejected, not %q", id, r.Status)
	}
	res, err := json.Marshal(r.Resolution)
	if err != nil {
		return nil, err
	}
	return s.itemTx(ctx, "resolve", id, func(ctx context.Context, tx pgx.Tx) (*Item, error) {
		if len(r.Attempts) > 0 {
			if _, err := pgAppend(ctx, tx, id, r.Attempts); err != nil {
				return nil, err
			}
		}
		// The conditional update is what makes exactly one resolution win:
		// a concurrent one waits for this row lock, then finds the row no
		// longer pending and updates nothing.
		it, err := scanItem(tx.QueryRow(ctx, `UPDATE reviews SET status = $1, resolved_ns = $2, resolution = $3
			WHERE id = $4 AND status = 'pending' RETURNING `+itemColumns+`, request`,
			string(r.Status), r.At.UnixNano(), string(res), id), true)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, missingOrResolved(tx.QueryRow(ctx, `SELECT count(*) FROM reviews WHERE id = $1`, id))
		}
		if err != nil {
			return nil, err
		}
		if r.Webhook {
			now := time.Now().UnixNano()
			if _, err := tx.Exec(ctx, `INSERT INTO webhook_outbox (id, type, review_id, body, created_ns, next_ns) VALUES ($1, $2, $3, $4, $5, $5)`,
				newID(), EventResolved, id, WebhookBody(EventResolved, it), now); err != nil {
				return nil, err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE review_rules SET status = $1 WHERE review_id = $2`, string(r.Status), id); err != nil {
			return nil, err
		}
		// Delivered to every listening replica when (and only if) this commits.
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, id); err != nil {
			return nil, err
		}
		return it, nil
	})
}

// itemTx runs fn in one transaction under the store's deadline (opCtx) and
// returns its item. ErrNotFound and ErrAlreadyResolved come back as they
// are, for callers to match; any other error is wrapped with op and id.
func (s *Postgres) itemTx(ctx context.Context, op, id string, fn func(context.Context, pgx.Tx) (*Item, error)) (*Item, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var it *Item
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		it, err = fn(ctx, tx)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrAlreadyResolved) {
			return nil, err
		}
		return nil, fmt.Errorf("review store: %s %s: %w", op, id, err)
	}
	return it, nil
}

// pgAppend adds attempts to a pending item, holding its row lock until the
// transaction ends so a concurrent resolution cannot slip in between.
func pgAppend(ctx context.Context, tx pgx.Tx, id string, atts []Attempt) (*Item, error) {
	var status, cur, route, contract string
	var created int64
	err := tx.QueryRow(ctx, `SELECT status, attempts, created_ns, route, contract_name FROM reviews WHERE id = $1 FOR UPDATE`, id).
		Scan(&status, &cur, &created, &route, &contract)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	b, nr, err := mergeAttempts(status, cur, atts)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE reviews SET attempts = $1 WHERE id = $2`, string(b), id); err != nil {
		return nil, err
	}
	if len(nr) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO review_rules (review_id, rule, created_ns, status, route, contract_name)
			SELECT $1, r, $2, 'pending', $4, $5 FROM unnest($3::text[]) AS r ON CONFLICT DO NOTHING`,
			id, created, nr, route, contract); err != nil {
			return nil, err
		}
	}
	return pgGetItem(ctx, tx, pgGet, id)
}

func (s *Postgres) AppendAttempts(ctx context.Context, id string, atts []Attempt) (*Item, error) {
	return s.itemTx(ctx, "append", id, func(ctx context.Context, tx pgx.Tx) (*Item, error) {
		return pgAppend(ctx, tx, id, atts)
	})
}

// pgExportQuery is Export's SQL for one page after c (nil: the first):
// served by reviews_status_done with a status, reviews_export without.
func pgExportQuery(f ExportFilter, c *exportCursor, limit int) (string, []any) {
	var where []string
	var a args
	if f.Status != "" {
		where = append(where, `status = `+a.add(string(f.Status)))
	}
	if f.Route != "" {
		where = append(where, `route = `+a.add(f.Route))
	}
	if !f.Since.IsZero() {
		where = append(where, `COALESCE(resolved_ns, created_ns) >= `+a.add(f.Since.UnixNano()))
	}
	if c != nil {
		where = append(where, `(COALESCE(resolved_ns, created_ns), id) < (`+a.add(c.at)+`, `+a.add(c.id)+`)`)
	}
	q := `SELECT ` + itemColumns + ` FROM reviews`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY COALESCE(resolved_ns, created_ns) DESC, id DESC LIMIT ` + a.add(limit)
	return q, a
}

// Export reads a page at a time, as SQLite's does: one query over the
// whole export held its snapshot (and a pooled connection) for as long as
// the client took to read it, which keeps VACUUM from reclaiming what
// retention deletes meanwhile. Each page runs under the store's deadline;
// the caller's context bounds the whole.
func (s *Postgres) Export(ctx context.Context, f ExportFilter, fn func(*Item) error) error {
	return pgExport(ctx, s.pool, s.timeout, s.exportPage, f, fn)
}

// pgExport is Export on pool (the store's, or a reader's), each page under
// its own deadline.
func pgExport(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration, page int, f ExportFilter, fn func(*Item) error) error {
	return exportPages(f, page, func(c *exportCursor) ([]*Item, error) {
		ctx, cancel := opCtx(ctx, timeout)
		defer cancel()
		q, a := pgExportQuery(f, c, page)
		return pgQuery(ctx, pool, "export", func(rs rows) ([]*Item, error) { return collectItems(rs, page) }, q, a...)
	}, fn)
}

// pgQuery runs a query on pool and reads its rows with scan; an error of
// either is wrapped as "review store: what: …".
func pgQuery[T any](ctx context.Context, pool *pgxpool.Pool, what string, scan func(rows) (T, error), query string, args ...any) (T, error) {
	var zero T
	rs, err := pool.Query(ctx, query, args...)
	if err != nil {
		return zero, fmt.Errorf("review store: %s: %w", what, err)
	}
	defer rs.Close()
	out, err := scan(rs)
	if err != nil {
		return zero, fmt.Errorf("review store: %s: %w", what, err)
	}
	return out, nil
}

func (s *Postgres) Pending(ctx context.Context) (map[string]int, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT route, count(*) FROM reviews WHERE status = 'pending' GROUP BY route`)
	if err != nil {
		return nil, fmt.Errorf("review store: pending: %w", err)
	}
	defer rows.Close()
	return scanPending(rows)
}

// DeleteResolvedBefore deletes in batches of pgRetentionBatch items, each
// its own statement under its own deadline (opCtx). One DELETE of every
// expired item ran under one call's deadline (10 s) and, past it, rolled
// back whole: at a million items it never finished, was tried again every
// second (Run retries a failed pass) and each try wrote and undid the same
// work (docs/benchmarks.md, session 10). Batches already committed stay
// deleted when ctx ends or a batch fails; the next pass goes on from there.
func (s *Postgres) DeleteResolvedBefore(ctx context.Context, t time.Time) (int, error) {
	total, err := resolvedInBatches(s.retentionBatch, func(st Status) (int, error) {
		return s.deleteBatch(ctx, pgRetention, string(st), t.UnixNano(), s.retentionBatch)
	})
	if err != nil {
		return total, fmt.Errorf("review store: retention: %w", err)
	}
	return total, nil
}

// deleteBatch runs one batch's DELETE under its own deadline and returns
// the rows it deleted.
func (s *Postgres) deleteBatch(ctx context.Context, query string, args ...any) (int, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// pgRetentionBatch is how many items one retention statement deletes.
const pgRetentionBatch = 1000

// pgRetention deletes one batch of a status's expired items, oldest first,
// found by reviews_status_done and then by primary key (TestPostgresListPlans;
// "id IN (SELECT … LIMIT)" was planned as a scan of reviews).
const pgRetention = `DELETE FROM reviews WHERE id = ANY (ARRAY(SELECT id FROM reviews
	WHERE status = $1 AND COALESCE(resolved_ns, created_ns) < $2
	ORDER BY COALESCE(resolved_ns, created_ns), id LIMIT $3))`

// DeleteDeliveriesBefore deletes in batches of pgRetentionBatch deliveries,
// each its own statement under its own deadline, as DeleteResolvedBefore
// does.
func (s *Postgres) DeleteDeliveriesBefore(ctx context.Context, t time.Time) (int, error) {
	total, err := inBatches(s.retentionBatch, func() (int, error) {
		return s.deleteBatch(ctx, pgOutboxPurge, t.UnixNano(), s.retentionBatch)
	})
	if err != nil {
		return total, fmt.Errorf("review store: outbox purge: %w", err)
	}
	return total, nil
}

// pgOutboxPurge deletes one batch of deliveries created before a time,
// oldest first, found by webhook_outbox_created and then by primary key
// (TestPostgresListPlans), in the form pgRetention takes.
const pgOutboxPurge = `DELETE FROM webhook_outbox WHERE id = ANY (ARRAY(SELECT id FROM webhook_outbox
	WHERE created_ns < $1 ORDER BY created_ns LIMIT $2))`

// ClaimDeliveries leases due deliveries in one statement: SKIP LOCKED lets
// replicas claiming at the same moment take disjoint rows instead of
// waiting on each other, and the lease (next_ns moved ahead) hides the
// claimed rows until it runs out.
func (s *Postgres) ClaimDeliveries(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]Delivery, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	out, err := pgQuery(ctx, s.pool, "claim deliveries", scanDeliveries, `UPDATE webhook_outbox SET next_ns = $2 WHERE id IN (
		SELECT id FROM webhook_outbox WHERE next_ns <= $1 ORDER BY next_ns LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING id, type, review_id, body, created_ns, tries`,
		now.UnixNano(), now.Add(lease).UnixNano(), limit)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

func (s *Postgres) FinishDelivery(ctx context.Context, id string, done bool, retryAt time.Time) error {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var err error
	if done {
		_, err = s.pool.Exec(ctx, `DELETE FROM webhook_outbox WHERE id = $1`, id)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE webhook_outbox SET next_ns = $1, tries = tries + 1 WHERE id = $2`, retryAt.UnixNano(), id)
	}
	if err != nil {
		return fmt.Errorf("review store: finish delivery: %w", err)
	}
	return nil
}

// pgRecentDedupe is RecentDedupe's query (TestPostgresListPlans).
const pgRecentDedupe = `SELECT ` + dedupeColumns + ` FROM reviews
		WHERE created_ns >= $1 AND dedupe_key IS NOT NULL AND dedupe_until_ns > $2 ORDER BY created_ns, id LIMIT $3`

// RecentDedupe reads reviews_created from since on; only items with a
// key carry a window.
func (s *Postgres) RecentDedupe(ctx context.Context, since, now time.Time, limit int) ([]DedupeRecord, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	return pgQuery(ctx, s.pool, "dedupe", scanDedupe, pgRecentDedupe,
		since.UnixNano(), now.UnixNano(), limit)
}
