package review_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

func TestMain(m *testing.M) { os.Exit(testkit.PostgresMain(m)) }

func openPostgres(t *testing.T) review.Store {
	s, err := review.OpenPostgres(context.Background(), testkit.PostgresDSN(t), review.PostgresOptions{})
	return suiteStore(t, s, err)
}

// The same table of behaviours the SQLite store passes.
func TestPostgresStore(t *testing.T) { storetest.Run(t, openPostgres) }

// Replicas starting at the same moment on a fresh database: the advisory
// lock lets one migrate while the others wait, then all find the schema.
func TestPostgresMigrateConcurrently(t *testing.T) {
	dsn := testkit.PostgresDSN(t)
	const n = 8
	var wg sync.WaitGroup
	stores := make([]*review.Postgres, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = review.OpenPostgres(context.Background(), dsn, review.PostgresOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	// Every store sees the one schema: an item written through one is read
	// through all.
	it := storetest.NewItem("m1", "a", time.Now())
	if ok, err := stores[0].Create(context.Background(), it, false); err != nil || !ok {
		t.Fatalf("create: %v %v", ok, err)
	}
	for i, s := range stores {
		if _, err := s.Get(context.Background(), "m1"); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
	}
	// And a second start finds every migration applied.
	again, err := review.OpenPostgres(context.Background(), dsn, review.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

// Two stores on one database stand for two replicas: a waiter subscribed
// through replica A's hub wakes when replica B resolves the item.
func TestPostgresNotifyAcrossStores(t *testing.T) {
	dsn := testkit.PostgresDSN(t)
	hubA := review.NewHub()
	a, err := review.OpenPostgres(context.Background(), dsn, review.PostgresOptions{Hub: hubA})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := review.OpenPostgres(context.Background(), dsn, review.PostgresOptions{Hub: review.NewHub()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Create(context.Background(), storetest.NewItem("w1", "a", time.Now()), false); err != nil {
		t.Fatal(err)
	}
	ch, cancel := hubA.Subscribe("w1")
	defer cancel()
	start := time.Now()
	if _, err := b.Resolve(context.Background(), "w1", review.Resolve{Status: review.StatusRejected, At: time.Now(),
		Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "ann"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Logf("woken %v after the resolution started", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("waiter on replica A not woken by replica B's resolution")
	}
	// A failed resolution (already resolved) notifies nobody: the NOTIFY is
	// part of the transaction that did not commit.
	ch2, cancel2 := hubA.Subscribe("w1")
	defer cancel2()
	if _, err := b.Resolve(context.Background(), "w1", review.Resolve{Status: review.StatusRejected, At: time.Now(),
		Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "bob"}}); !errors.Is(err, review.ErrAlreadyResolved) {
		t.Fatalf("second resolve: %v", err)
	}
	select {
	case <-ch2:
		t.Fatal("woken by a resolution that lost")
	case <-time.After(300 * time.Millisecond):
	}
}

// Deliveries claimed at the same moment by several replicas are disjoint,
// and a claim that is never finished (the replica died) comes back once
// its lease runs out: at least once.
func TestPostgresClaimDisjointAndLeases(t *testing.T) {
	dsn := testkit.PostgresDSN(t)
	var stores []*review.Postgres
	for range 3 {
		s, err := review.OpenPostgres(context.Background(), dsn, review.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	const items = 60
	for i := range items {
		it := storetest.NewItem("d"+itoa(i), "a", time.Now())
		if _, err := stores[0].Create(context.Background(), it, true); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range stores {
		for range 4 {
			wg.Go(func() {
				for {
					ds, err := s.ClaimDeliveries(context.Background(), now, 7, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ds) == 0 {
						return
					}
					mu.Lock()
					for _, d := range ds {
						seen[d.ID]++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(seen) != items {
		t.Fatalf("%d deliveries claimed, want %d", len(seen), items)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s claimed %d times within its lease", id, n)
		}
	}
	// Nobody finished them: after the lease they are due again.
	ds, err := stores[2].ClaimDeliveries(context.Background(), now.Add(2*time.Minute), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != items {
		t.Fatalf("after the lease: %d due again, want %d", len(ds), items)
	}
}

func itoa(i int) string { return string(rune('0'+i/10%10)) + string(rune('0'+i%10)) }

// The DSN's password never reaches an error (and so no log line).
func TestPostgresErrorsHideThePassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:s3cretpw@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"postgres://u:s3cretpw@127.0.0.1:1/db?sslmode=bogus",
		"host=127.0.0.1 port=1 user=u password=s3cretpw connect_timeout=2",
	} {
		_, err := review.OpenPostgres(context.Background(), dsn, review.PostgresOptions{OpTimeout: 2 * time.Second})
		if err == nil {
			t.Fatalf("%s: opened", dsn)
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Fatalf("error carries the password: %v", err)
		}
	}
}

// BenchmarkPostgresCreate is one needs_review item's write on the
// PostgreSQL store by 1 and 16 writers (group commit: one statement per
// group), with the server's CPU per item beside the client's.
func BenchmarkPostgresCreate(b *testing.B) {
	benchCreate(b, func(b *testing.B) (review.Store, serverStats) {
		dsn := testkit.PostgresDSN(b)
		s, err := review.OpenPostgres(context.Background(), dsn, review.PostgresOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return s, serverStats{cpu: postgresCPU(b, dsn), wal: postgresWAL(b, dsn)}
	})
}

// postgresCPU gives the CPU time (user+system) of the server's postmaster
// and its live children, the backends serving the store's pool among them.
func postgresCPU(b *testing.B, dsn string) func() time.Duration {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	var backend int
	err = conn.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend)
	conn.Close(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	postmaster, _, ok := procStat(backend)
	if !ok {
		b.Fatal("no /proc entry for the backend")
	}
	return func() time.Duration {
		var ticks int64
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			pid, _ := strconv.Atoi(filepath.Base(p))
			if parent, t, ok := procStat(pid); ok && (pid == postmaster || parent == postmaster) {
				ticks += t
			}
		}
		return time.Duration(ticks) * (time.Second / 100) // USER_HZ
	}
}

// postgresWAL gives the server's WAL insert position in bytes: what was
// written to the WAL between two readings, this connection's own query
// included (it writes none).
func postgresWAL(b *testing.B, dsn string) func() int64 {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return func() int64 {
		var n int64
		if err := conn.QueryRow(context.Background(), `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
}

// procStat reads a process's parent pid and utime+stime in clock ticks.
func procStat(pid int) (ppid int, ticks int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, ut + st, true
}

// After the server restarts, the pool reconnects and the listener does
// too: a resolution on another store wakes this store's waiter again.
func TestPostgresReconnectsAfterRestart(t *testing.T) {
	srv := testkit.StartPostgres(t)
	hub := review.NewHub()
	a, err := review.OpenPostgres(context.Background(), srv.DSN, review.PostgresOptions{Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := review.OpenPostgres(context.Background(), srv.DSN, review.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv.Pause(t)
	if _, err := a.Create(context.Background(), storetest.NewItem("down", "a", time.Now()), false); err == nil {
		t.Fatal("create succeeded with the server stopped")
	}
	srv.Resume(t)
	// The first calls may meet connections the restart closed; within a
	// few seconds both stores work again.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := a.Create(context.Background(), storetest.NewItem("up", "a", time.Now()), false)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store did not recover after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ch, cancel := hub.Subscribe("up")
	defer cancel()
	deadline = time.Now().Add(15 * time.Second)
	for {
		_, err := b.Resolve(context.Background(), "up", review.Resolve{Status: review.StatusRejected, At: time.Now(),
			Resolution: review.Resolution{By: review.ByReviewer, Reviewer: "ann"}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resolve did not recover after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken after the restart: the listener did not reconnect (or catch up)")
	}
}

// A database left at any older migration level upgrades on open, keeps
// an item written at the first level usable, and passes the store suite.
func TestPostgresUpgradesFromEveryLevel(t *testing.T) {
	ctx := context.Background()
	atLevel := func(t *testing.T, level int, old bool) review.Store {
		dsn := testkit.PostgresDSN(t)
		if err := review.PostgresAtLevel(ctx, dsn, level, old); err != nil {
			t.Fatal(err)
		}
		s, err := review.OpenPostgres(ctx, dsn, review.PostgresOptions{})
		return suiteStore(t, s, err)
	}
	upgradesFromEveryLevel(t, review.PostgresLevels(), atLevel)
}

// A migration that fails half way (here 0003, at its last statement, on
// an index someone created by hand) leaves the database as it was before
// it: the open fails naming the migration, the earlier level stays
// recorded and usable, and once the cause is gone the next open applies it.
func TestPostgresMigrationFailingHalfway(t *testing.T) {
	ctx := context.Background()
	dsn := testkit.PostgresDSN(t)
	if err := review.PostgresAtLevel(ctx, dsn, 2, true); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE INDEX review_rules_rule_status ON review_rules (rule)`); err != nil {
		t.Fatal(err)
	}
	if _, err := review.OpenPostgres(ctx, dsn, review.PostgresOptions{}); err == nil || !strings.Contains(err.Error(), "0003_list_indexes.sql") {
		t.Fatalf("open over a conflicting index: %v", err)
	}
	var version, cols int
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM contractd_schema_migrations`).Scan(&version); err != nil || version != 2 {
		t.Fatalf("recorded level %d (%v), want 2", version, err)
	}
	// 0003's earlier statements (new columns, indexes) were rolled back with it.
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'review_rules' AND column_name = 'status'`).Scan(&cols); err != nil || cols != 0 {
		t.Fatalf("review_rules.status exists after the failed migration: %d %v", cols, err)
	}
	if _, err := conn.Exec(ctx, `DROP INDEX review_rules_rule_status`); err != nil {
		t.Fatal(err)
	}
	s, err := review.OpenPostgres(ctx, dsn, review.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantOldPending(t, s)
}
