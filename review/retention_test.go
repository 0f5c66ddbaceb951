package review

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// populateExpired populates n items (90 % resolved) all past a day's
// retention.
func populateExpired(tb testing.TB, s *SQLite, n int) {
	populate(tb, s, n, time.Now().Add(-time.Duration(n+1000)*time.Second-48*time.Hour))
}

// retentionStall runs one retention pass (a day's retention) over s while
// a writer stores a new item every 2 ms, and gives the pass's duration and
// the Create latencies seen during it.
func retentionStall(tb testing.TB, s *SQLite) (pass time.Duration, creates []time.Duration, deleted int) {
	tb.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	stop := testkit.Repeat(1, func(_, i int) bool {
		it := &Item{ID: fmt.Sprintf("new%09d", i), Status: StatusPending, CreatedAt: time.Now(), Route: "route-1",
			Contract: Ref{Name: "contract-1"}, Attempts: []Attempt{{AttemptReport: AttemptReport{Attempt: 1}}}}
		start := time.Now()
		if _, err := s.Create(ctx, it, false); err != nil {
			tb.Errorf("create during retention: %v", err)
			return false
		}
		mu.Lock()
		creates = append(creates, time.Since(start))
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		return true
	})
	time.Sleep(20 * time.Millisecond) // the writer is running
	start := time.Now()
	deleted, err := s.DeleteResolvedBefore(ctx, time.Now().Add(-24*time.Hour))
	pass = time.Since(start)
	stop()
	if err != nil {
		tb.Fatal(err)
	}
	return pass, creates, deleted
}

// A retention pass over many resolved items must not hold the write lock
// for the whole pass: a needs_review answer arriving meanwhile waits for
// one bounded batch, not for the deletion of every expired item (which at
// a million items takes tens of seconds, and each waiting Create spools
// after 5 s). Measured relative to the pass so the machine's load does
// not decide it: one big DELETE makes some Create wait for most of it.
func TestSQLiteRetentionDoesNotHoldWriters(t *testing.T) {
	s := freshSQLite(t)
	const n = 40_000
	populateExpired(t, s, n)
	pass, creates, deleted := retentionStall(t, s)
	if want := n - n/10; deleted != want {
		t.Fatalf("deleted %d, want %d", deleted, want)
	}
	if len(creates) == 0 {
		t.Fatal("no Create ran during the pass")
	}
	longest := slices.Max(creates)
	t.Logf("pass %v over %d items, %d creates meanwhile, longest %v", pass.Round(time.Millisecond), deleted, len(creates), longest.Round(time.Microsecond))
	if longest > pass/4 {
		t.Errorf("a Create waited %v of the %v pass: retention holds the write lock for the whole pass", longest, pass)
	}
	var pending, rules int
	if err := s.db.QueryRow(`SELECT count(*) FROM reviews WHERE status = 'pending'`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if want := n/10 + len(creates); pending != want {
		t.Errorf("%d pending items left, want %d", pending, want)
	}
	if err := s.db.QueryRow(`SELECT count(*) FROM review_rules x WHERE NOT EXISTS (SELECT 1 FROM reviews r WHERE r.id = x.review_id)`).Scan(&rules); err != nil || rules != 0 {
		t.Errorf("%d rule rows of deleted items left (%v)", rules, err)
	}
}

// A retention pass over more expired items than one call's deadline can
// delete still finishes: each batch runs under its own deadline. One
// DELETE of every expired item ran out of OpTimeout, rolled back whole and
// was tried again (Run retries a failed pass every second) without end.
// The deadline here stands for the 10 s default against a million items.
func TestPostgresRetentionOutlastsOneCallDeadline(t *testing.T) {
	s, err := OpenPostgres(context.Background(), testkit.PostgresDSN(t), PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 100_000
	pgPopulate(t, s, n, time.Now().Add(-time.Duration(n+1000)*time.Second-48*time.Hour))
	s.timeout = 300 * time.Millisecond
	start := time.Now()
	deleted, err := s.DeleteResolvedBefore(context.Background(), time.Now().Add(-24*time.Hour))
	t.Logf("pass: %d deleted in %v (%v)", deleted, time.Since(start).Round(time.Millisecond), err)
	if err != nil {
		t.Fatalf("retention under a %v call deadline: %v", s.timeout, err)
	}
	if want := n - n/10; deleted != want {
		t.Fatalf("deleted %d, want %d", deleted, want)
	}
	var left, rules int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM reviews`).Scan(&left); err != nil || left != n/10 {
		t.Fatalf("%d items left (%v), want the %d pending", left, err, n/10)
	}
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM review_rules`).Scan(&rules); err != nil {
		t.Fatal(err)
	}
	var want int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM review_rules x JOIN reviews r ON r.id = x.review_id`).Scan(&want); err != nil || rules != want {
		t.Fatalf("%d rule rows, %d of them of items left (%v)", rules, want, err)
	}
}

// BenchmarkSQLiteRetention1M runs retention over a million items (900,000
// resolved, all expired) while a writer stores an item every 2 ms, and
// reports the pass's duration and the longest and median Create during it.
// CONTRACTD_BENCH_RETENTION_DB names the populated file, built when
// missing (about a minute); each round deletes from a copy of it.
// CONTRACTD_BENCH_RETENTION_BATCH sets the items per batch.
//
//	go test -run '^$' -bench SQLiteRetention1M -benchtime 1x ./review/
func BenchmarkSQLiteRetention1M(b *testing.B) {
	const n = 1_000_000
	tmpl := os.Getenv("CONTRACTD_BENCH_RETENTION_DB")
	if tmpl == "" {
		tmpl = filepath.Join(b.TempDir(), "template.db")
	}
	if _, err := os.Stat(tmpl); err != nil {
		s, err := OpenSQLite(context.Background(), tmpl)
		if err != nil {
			b.Fatal(err)
		}
		populateExpired(b, s, n)
		if _, err := s.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		b.StopTimer()
		file := filepath.Join(b.TempDir(), "reviews.db")
		if err := copyFile(tmpl, file); err != nil {
			b.Fatal(err)
		}
		s, err := OpenSQLite(context.Background(), file)
		if err != nil {
			b.Fatal(err)
		}
		if v := os.Getenv("CONTRACTD_BENCH_RETENTION_BATCH"); v != "" {
			if s.retentionBatch, err = strconv.Atoi(v); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		pass, creates, deleted := retentionStall(b, s)
		b.StopTimer()
		s.Close()
		if deleted != n-n/10 || len(creates) == 0 {
			b.Fatalf("deleted %d, %d creates", deleted, len(creates))
		}
		slices.Sort(creates)
		b.ReportMetric(pass.Seconds(), "pass-s")
		b.ReportMetric(float64(creates[len(creates)-1].Microseconds())/1000, "max-create-ms")
		b.ReportMetric(float64(creates[len(creates)*99/100].Microseconds())/1000, "p99-create-ms")
		b.ReportMetric(float64(creates[len(creates)/2].Microseconds())/1000, "p50-create-ms")
		b.ReportMetric(float64(len(creates)), "creates")
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// An item whose attempts do not decode (a damaged row) failed its whole
// retention batch, and being the oldest it headed the first batch of every
// pass: retention deleted nothing any more. It is now deleted with its rule
// rows (found without its rules), the pass goes on and reports it by a
// *DamagedItemsError, and the next pass finds nothing left.
func TestSQLiteRetentionDeletesDamagedItem(t *testing.T) {
	s := freshSQLite(t)
	s.retentionBatch = 4 // several batches, the damaged item in the first
	ctx := context.Background()
	populate(t, s, 40, time.Now().Add(-72*time.Hour))
	const bad = "it000000001" // the oldest resolved item
	var rules int
	if err := s.db.QueryRow(`SELECT count(*) FROM review_rules WHERE review_id = ?`, bad).Scan(&rules); err != nil || rules == 0 {
		t.Fatalf("the damaged item's rule rows before: %d, %v", rules, err)
	}
	if _, err := s.w.Exec(`UPDATE reviews SET attempts = '[{"attempt":1,' WHERE id = ?`, bad); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteResolvedBefore(ctx, time.Now().Add(-24*time.Hour))
	var de *DamagedItemsError
	if !errors.As(err, &de) || len(de.IDs) != 1 || de.IDs[0] != bad {
		t.Fatalf("retention: %d deleted, error %v; want a DamagedItemsError naming %s", n, err, bad)
	}
	if want := 40 - 40/10; n != want {
		t.Errorf("deleted %d, want every resolved item, %d", n, want)
	}
	var resolved, orphans int
	if err := s.db.QueryRow(`SELECT count(*) FROM reviews WHERE status != 'pending'`).Scan(&resolved); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(`SELECT count(*) FROM review_rules WHERE status != 'pending' OR review_id = ?`, bad).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if resolved != 0 || orphans != 0 {
		t.Errorf("after retention: %d resolved items, %d resolved rule rows left", resolved, orphans)
	}
	if n, err := s.DeleteResolvedBefore(ctx, time.Now().Add(-24*time.Hour)); n != 0 || err != nil {
		t.Errorf("the next pass: %d, %v", n, err)
	}
}

// sqlDeleteRulesOfItem seeks: one search of the primary key per distinct
// rule, no scan of review_rules.
func TestSQLiteDeleteRulesOfItemPlan(t *testing.T) {
	s := populatedSQLite(t)
	rows, err := s.db.Query(`EXPLAIN QUERY PLAN `+sqlDeleteRulesOfItem, "approved", 1, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	for _, d := range plan {
		if strings.HasPrefix(d, "SCAN review_rules") {
			t.Errorf("plan scans review_rules: %q in\n%s", d, strings.Join(plan, "\n"))
		}
	}
	t.Logf("plan:\n%s", strings.Join(plan, "\n"))
}
