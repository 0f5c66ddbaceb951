package review

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The rules of populate's items, SQL expressions of the item's creation
// second (%s): every item breaks the first, every third also the second
// (which may be the same rule).
const (
	ruleA = `'rule-' || ((%[1]s * 69069 >> 3) %% 6)`
	ruleB = `'rule-' || ((%[1]s * 48271 >> 4) %% 7)`
)

// populate writes n items straight into the tables, the way years of
// needs_review answers would leave them: 8 routes, 5 contracts, 10 %
// pending, one or two violation rules per item, one second apart; the
// fields are spread by multiplicative hashes so no two filters correlate.
func populate(tb testing.TB, s *SQLite, n int, base time.Time) {
	tb.Helper()
	ctx := context.Background()
	b := base.UnixNano()
	stmts := []string{
		fmt.Sprintf(`INSERT INTO reviews (id, status, created_ns, resolved_ns, route, prompt_name, prompt_sha,
			contract_name, contract_sha, key_id, input, request, attempts, resolution)
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < %d)
		SELECT printf('it%%09d', i),
			CASE WHEN i %% 10 = 0 THEN 'pending' WHEN i %% 10 < 7 THEN 'approved' ELSE 'rejected' END,
			%d + i * 1000000000,
			CASE WHEN i %% 10 = 0 THEN NULL ELSE %d + i * 1000000000 + 60000000000 END,
			'route-' || ((i * 2654435761 >> 7) %% 8), 'prompt', 'psha', 'contract-' || ((i * 40503 >> 5) %% 5), 'csha', 'key000000000',
			'{"subject":"Broken window","body":"My window broke in the storm."}', '{}',
			'[{"attempt":1,"temperature":0.2,"shortened":false,"finish_reason":"stop","usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15},"violations":[{"path":"/label","rule":"' || a || '","message":"not a label"}' ||
				CASE WHEN b IS NOT NULL AND b != a THEN ',{"path":"/label","rule":"' || b || '","message":"not a label"}' ELSE '' END ||
				'],"output_sha256":"x","output":"{\"label\":\"Windows\"}"}]',
			CASE WHEN i %% 10 = 0 THEN NULL ELSE '{"by":"reviewer","reviewer":"ana","note":"","output":{"label":"window"}}' END
		FROM (SELECT i, %s AS a, CASE WHEN sec %% 3 = 0 THEN %s END AS b
			FROM (SELECT i, (%d + i * 1000000000) / 1000000000 AS sec FROM n))`, n-1, b, b, fmt.Sprintf(ruleA, "sec"), fmt.Sprintf(ruleB, "sec"), b),
		// The rule rows of each item's attempts (the rules its violations
		// name), as the store writes them.
		`INSERT INTO review_rules (review_id, rule, created_ns, status, route, contract_name)
		SELECT id, ` + fmt.Sprintf(ruleA, "(created_ns / 1000000000)") + `, created_ns, status, route, contract_name FROM reviews`,
		`INSERT OR IGNORE INTO review_rules (review_id, rule, created_ns, status, route, contract_name)
		SELECT id, ` + fmt.Sprintf(ruleB, "(created_ns / 1000000000)") + `, created_ns, status, route, contract_name FROM reviews WHERE created_ns / 1000000000 % 3 = 0`,
		`ANALYZE`,
	}
	for _, q := range stmts {
		if _, err := s.w.ExecContext(ctx, q); err != nil {
			tb.Fatalf("populate: %v", err)
		}
	}
}

// populatedSQLite is a fresh store holding 5000 populated items, the
// first a day old, for reading query plans off.
func populatedSQLite(t *testing.T) *SQLite {
	t.Helper()
	s := freshSQLite(t)
	populate(t, s, 5000, time.Now().Add(-24*time.Hour))
	return s
}

// freshSQLite is a new store in t's temporary directory, closed at t's end.
func freshSQLite(t *testing.T) *SQLite {
	t.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// listFilters is every combination of List's filters a reviewer can send.
func listFilters() map[string]Filter {
	out := map[string]Filter{}
	for _, st := range []Status{"", StatusPending, StatusApproved} {
		for _, route := range []string{"", "route-3"} {
			for _, contract := range []string{"", "contract-2"} {
				for _, rule := range []string{"", "rule-4"} {
					f := Filter{Status: st, Route: route, Contract: contract, Rule: rule, Limit: DefaultLimit}
					var name []string
					for _, p := range [][2]string{{"status", string(st)}, {"route", route}, {"contract", contract}, {"rule", rule}} {
						if p[1] != "" {
							name = append(name, p[0])
						}
					}
					if len(name) == 0 {
						name = []string{"none"}
					}
					if st == StatusApproved {
						name[0] = "approved-" + name[0]
					}
					out[strings.Join(name, "+")] = f
				}
			}
		}
	}
	return out
}

// listPages is each of listFilters' combinations for the first page
// (name/first) and for a later one (name/next: its cursor at item
// cursorID, half a day back), as the plan tests read them.
func listPages(cursorID string) map[string]Filter {
	out := map[string]Filter{}
	for name, f := range listFilters() {
		out[name+"/first"] = f
		f.Cursor = encodeCursor(time.Now().Add(-12*time.Hour).UnixNano(), cursorID)
		out[name+"/next"] = f
	}
	return out
}

// Every filter combination is answered from an index in the list's order:
// no scan of the whole table and no sort of the matching rows (which at a
// million items is the difference between a millisecond and seconds).
func TestSQLiteListPlans(t *testing.T) {
	s := populatedSQLite(t)
	for name, f := range listPages("it000002000") {
		t.Run(name, func(t *testing.T) {
			q, args, err := listQuery(f)
			if err != nil {
				t.Fatal(err)
			}
			plan := explain(t, s.db, q, args)
			if strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("sorts the matches:\n%s", plan)
			}
			for _, line := range strings.Split(plan, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "SCAN") && !strings.Contains(line, "INDEX") {
					t.Errorf("scans a table without an index:\n%s", plan)
				}
			}
			// A later page starts where the cursor points: the index is
			// searched by the cursor's (created_ns, id), not read from
			// the newest entry on, which at a million items made a deep
			// page read every newer entry first.
			if f.Cursor != "" && !strings.Contains(plan, "created_ns,id)<(?,?)") && !strings.Contains(plan, "created_ns,review_id)<(?,?)") {
				t.Errorf("does not seek to the cursor:\n%s", plan)
			}
		})
	}
}

// populateOutbox writes a delivery for each of the store's items, created
// with the item, as a webhook receiver that never answered leaves them.
func populateOutbox(tb testing.TB, s *SQLite) {
	tb.Helper()
	for _, q := range []string{
		`INSERT INTO webhook_outbox (id, type, review_id, body, created_ns, next_ns, tries)
		SELECT 'wh' || id, 'review.created', id, x'7b7d', created_ns, created_ns + 3600000000000, 30 FROM reviews`,
		`ANALYZE`,
	} {
		if _, err := s.w.Exec(q); err != nil {
			tb.Fatalf("populate outbox: %v", err)
		}
	}
}

// Export, retention, the outbox purge and the pending gauge read indexes
// too.
func TestSQLiteOtherPlans(t *testing.T) {
	s := populatedSQLite(t)
	populateOutbox(t, s)
	since := time.Now().Add(-time.Hour)
	type query struct {
		q    string
		args []any
	}
	cases := map[string]query{
		"pending":      {`SELECT route, count(*) FROM reviews WHERE status = ? GROUP BY route`, []any{"pending"}},
		"retention":    {sqlRetention, []any{"approved", since.UnixNano(), retentionBatch}},
		"dedupe-sync":  {sqlRecentDedupe, []any{since.UnixNano(), since.UnixNano(), 1000}},
		"outbox-purge": {sqlOutboxPurge, []any{since.UnixNano(), retentionBatch}},
	}
	for _, f := range []ExportFilter{
		{Status: StatusApproved},
		{Status: StatusApproved, Since: since},
		{Status: StatusApproved, Route: "route-3", Since: since},
		{Status: StatusPending},
		{Status: StatusPending, Route: "route-3", Since: since},
	} {
		name := fmt.Sprintf("export/%s,route=%q,since=%v", f.Status, f.Route, !f.Since.IsZero())
		q, args := exportQuery(f, nil, exportPage)
		cases[name] = query{q, args}
		q, args = exportQuery(f, &exportCursor{at: since.Add(30 * time.Minute).UnixNano(), id: "it000004000"}, exportPage)
		cases[name+"/next"] = query{q, args}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			plan := explain(t, s.db, c.q, c.args)
			if strings.Contains(plan, "TEMP B-TREE FOR ORDER BY") {
				t.Errorf("sorts the matches:\n%s", plan)
			}
			for _, line := range strings.Split(plan, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "SCAN") && !strings.Contains(line, "INDEX") {
					t.Errorf("scans a table without an index:\n%s", plan)
				}
			}
		})
	}
}

func explain(t *testing.T, db *sql.DB, q string, args []any) string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String()
}

// BenchmarkSQLiteList1M lists the first and a later page of every filter
// combination from a store holding a million items (built once, about a
// minute; CONTRACTD_BENCH_REVIEWS_DB keeps the file between runs).
//
//	go test -run '^$' -bench SQLiteList1M -benchtime 200x ./review/
func BenchmarkSQLiteList1M(b *testing.B) {
	const n = 1_000_000
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	file := os.Getenv("CONTRACTD_BENCH_REVIEWS_DB")
	if file == "" {
		file = filepath.Join(b.TempDir(), "reviews.db")
	}
	_, statErr := os.Stat(file)
	s, err := OpenSQLite(context.Background(), file)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if statErr != nil {
		start := time.Now()
		populate(b, s, n, base)
		b.Logf("populated %d items in %v", n, time.Since(start).Round(time.Millisecond))
	}
	var count int
	if err := s.db.QueryRow(`SELECT count(*) FROM reviews`).Scan(&count); err != nil || count != n {
		b.Fatalf("store holds %d items (%v), want %d", count, err, n)
	}
	var half struct {
		ns int64
		id string
	}
	if err := s.db.QueryRow(`SELECT created_ns, id FROM reviews ORDER BY created_ns DESC, id DESC LIMIT 1 OFFSET ?`, n/2).Scan(&half.ns, &half.id); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	names := []string{"none", "status", "route", "contract", "rule", "status+route", "status+rule", "route+rule", "status+route+contract+rule", "approved-status+route"}
	all := listFilters()
	for _, name := range names {
		f, ok := all[name]
		if !ok {
			b.Fatalf("no filter %s", name)
		}
		for _, page := range []string{"first", "deep", "half"} {
			b.Run(name+"/"+page, func(b *testing.B) {
				if page == "half" {
					// A cursor at the middle of the store's time range: a
					// reviewer paging far back. Reading every newer entry
					// to reach it is what a cursor that does not seek costs.
					f.Cursor = encodeCursor(half.ns, half.id)
				}
				if page == "deep" {
					// A cursor 100 pages into the matches.
					g := f
					g.Limit = MaxLimit
					// A cursor 5,000 matches in (or at the last full page
					// when fewer match).
					for range 10 {
						items, next, err := s.List(ctx, g)
						if err != nil {
							b.Fatalf("paging: %v", err)
						}
						if next == "" || len(items) < g.Limit {
							break
						}
						f.Cursor = g.Cursor
						g.Cursor = next
					}
				}
				b.ResetTimer()
				for range b.N {
					items, _, err := s.List(ctx, f)
					if err != nil || len(items) == 0 {
						b.Fatalf("%d items, %v", len(items), err)
					}
				}
			})
		}
	}
	b.Run("pending-counts", func(b *testing.B) {
		for range b.N {
			if _, err := s.Pending(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for i := range b.N {
			if _, err := s.Get(ctx, fmt.Sprintf("it%09d", (i*7919)%n)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
