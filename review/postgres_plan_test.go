package review

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// pgPopulate writes n items straight into the tables, spread like
// populate's (8 routes, 5 contracts, 10 % pending, one or two rules).
func pgPopulate(tb testing.TB, s *Postgres, n int, base time.Time) {
	tb.Helper()
	b := base.UnixNano()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO reviews (id, status, created_ns, resolved_ns, route, prompt_name, prompt_sha,
			contract_name, contract_sha, key_id, input, request, attempts, resolution)
		SELECT 'it' || lpad(i::text, 9, '0'),
			CASE WHEN i %% 10 = 0 THEN 'pending' WHEN i %% 10 < 7 THEN 'approved' ELSE 'rejected' END,
			%d + i * 1000000000::bigint,
			CASE WHEN i %% 10 = 0 THEN NULL ELSE %d + i * 1000000000::bigint + 60000000000 END,
			'route-' || ((i::bigint * 2654435761 >> 7) %% 8), 'prompt', 'psha', 'contract-' || ((i::bigint * 40503 >> 5) %% 5), 'csha', 'key000000000',
			'{}', '{}', '[]', NULL
		FROM generate_series(0, %d) AS i`, b, b, n-1),
		`INSERT INTO review_rules (review_id, rule, created_ns, status, route, contract_name)
		SELECT id, 'rule-' || ((created_ns / 1000000000 * 69069 >> 3) % 6), created_ns, status, route, contract_name FROM reviews`,
		`INSERT INTO review_rules (review_id, rule, created_ns, status, route, contract_name)
		SELECT id, 'rule-' || ((created_ns / 1000000000 * 48271 >> 4) % 7), created_ns, status, route, contract_name FROM reviews
		WHERE created_ns / 1000000000 % 3 = 0 ON CONFLICT DO NOTHING`,
		`ANALYZE`,
	} {
		if _, err := s.pool.Exec(context.Background(), q); err != nil {
			tb.Fatalf("populate: %v", err)
		}
	}
}

func pgExplain(t *testing.T, s *Postgres, q string, args []any) string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `EXPLAIN `+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// Every list filter combination, first page and a later one, and export,
// retention, the outbox purge and the pending gauge are served by an index: no sequential
// scan of reviews or review_rules (PostgreSQL's planner, on 50,000 items).
func TestPostgresListPlans(t *testing.T) {
	s, err := OpenPostgres(context.Background(), testkit.PostgresDSN(t), PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pgPopulate(t, s, 50000, time.Now().Add(-24*time.Hour))
	check := func(t *testing.T, plan string) {
		if os.Getenv("PLAN_DEBUG") != "" && strings.Contains(plan, "Sort") {
			t.Logf("sorts:\n%s", plan)
		}
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("scans a table without an index:\n%s", plan)
		}
	}
	for name, f := range listPages("it000020000") {
		t.Run(name, func(t *testing.T) {
			q, args, err := pgListQuery(f)
			if err != nil {
				t.Fatal(err)
			}
			check(t, pgExplain(t, s, q, args))
		})
	}
	since := time.Now().Add(-time.Hour)
	for _, f := range []ExportFilter{
		{Status: StatusApproved},
		{Status: StatusApproved, Since: since},
		{Status: StatusApproved, Route: "route-3", Since: since},
	} {
		t.Run(fmt.Sprintf("export/route=%q,since=%v", f.Route, !f.Since.IsZero()), func(t *testing.T) {
			q, args := pgExportQuery(f, nil, exportPage)
			check(t, pgExplain(t, s, q, args))
		})
		t.Run(fmt.Sprintf("export/route=%q,since=%v/next", f.Route, !f.Since.IsZero()), func(t *testing.T) {
			q, args := pgExportQuery(f, &exportCursor{at: since.Add(30 * time.Minute).UnixNano(), id: "it000040000"}, exportPage)
			check(t, pgExplain(t, s, q, args))
		})
	}
	t.Run("pending", func(t *testing.T) {
		check(t, pgExplain(t, s, `SELECT route, count(*) FROM reviews WHERE status = 'pending' GROUP BY route`, nil))
	})
	t.Run("retention", func(t *testing.T) {
		for _, st := range []Status{StatusApproved, StatusRejected} {
			check(t, pgExplain(t, s, pgRetention, []any{string(st), since.Add(-20 * time.Hour).UnixNano(), pgRetentionBatch}))
		}
	})
	t.Run("outbox-purge", func(t *testing.T) {
		// A delivery per item, as a receiver that never answered leaves them.
		for _, q := range []string{`INSERT INTO webhook_outbox (id, type, review_id, body, created_ns, next_ns, tries)
			SELECT 'wh' || id, 'review.created', id, '\x7b7d', created_ns, created_ns + 3600000000000, 30 FROM reviews`, `ANALYZE webhook_outbox`} {
			if _, err := s.pool.Exec(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		}
		check(t, pgExplain(t, s, pgOutboxPurge, []any{since.Add(-2 * time.Hour).UnixNano(), pgRetentionBatch}))
	})
	t.Run("dedupe", func(t *testing.T) {
		// The sync's poll: the last half second's items.
		check(t, pgExplain(t, s, pgRecentDedupe,
			[]any{time.Now().Add(-500 * time.Millisecond).UnixNano(), time.Now().UnixNano(), 1000}))
	})
}
