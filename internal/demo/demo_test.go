package demo

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/sim"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/review"
)

const demoConfig = "../../examples/demo/contractd.yaml"

// The whole demo in process: the simulator and contractd's proxy on test
// servers, the driver against them, its table cross-checked with the
// audit events the proxy wrote.
func TestDemoEndToEnd(t *testing.T) {
	cat, err := sim.LoadCatalog(demoConfig)
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim.New(sim.Options{Seed: 7, Catalog: cat, FailureRate: 0.3, ColdFactor: 0.2}).Handler(nil))
	defer simSrv.Close()

	raw, err := os.ReadFile(demoConfig)
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.ReplaceAll(raw, []byte("http://127.0.0.1:18181/v1"), []byte(simSrv.URL+"/v1"))
	rt, err := config.LoadBytes(demoConfig, raw)
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.Create(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv := proxy.NewServer(rt, proxy.NewCaller(func(*config.Upstream) string { return "" }), audit.NewWriter(f), nil)
	dbPath := filepath.Join(t.TempDir(), "reviews.db")
	q := proxy.NewReviewQueue(context.Background(), func(ctx context.Context) (review.Store, error) { return review.OpenSQLite(ctx, dbPath) },
		filepath.Join(filepath.Dir(dbPath), "review-spool.jsonl"), nil)
	defer q.Close()
	srv.Reviews = q
	admin := &proxy.Admin{Reviews: srv.ReviewAdmin()}
	admin.SetReady(true)
	api := httptest.NewServer(srv.Handler(admin))
	defer api.Close()

	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = Run(ctx, Options{Config: demoConfig, API: api.URL, Admin: api.URL, Upstream: simSrv.URL,
		AuditFile: auditPath, Auto: 1, Wait: 5 * time.Second, Out: &out})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Cross-check: all", "repaired", "needs_review", "12 covered", "needs_review answers are stored items", "/review/", "/approve"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// A table that disagrees with the audit is reported.
func TestCrossCheckFindsDifferences(t *testing.T) {
	rows := []*Row{{Route: "r", RequestID: "a", Status: 200, Outcome: "valid", Attempts: 1},
		{Route: "r", RequestID: "b", Status: 422, Outcome: "needs_review", Attempts: 2, Rules: []string{"label", "enum"}},
		{Route: "r", RequestID: "c", Status: 200, Outcome: "valid", Attempts: 1}}
	ev := func(id string, outcome audit.Outcome, status int, rules ...string) *Event {
		e := &Event{RequestID: id, Route: "r", Outcome: outcome, Status: status}
		for _, r := range rules {
			var a EventAttempt
			if r != "" {
				a.Violations = append(a.Violations, EventViolation{r})
			}
			e.Attempts = append(e.Attempts, a)
		}
		return e
	}
	events := map[string]*Event{
		"a": ev("a", "valid", 200, ""),
		"b": ev("b", "needs_review", 422, "label", "label"),
	}
	got := crossCheck(rows, events)
	if len(got) != 2 || !strings.Contains(got[0], "review rules") || !strings.Contains(got[1], "no audit event") {
		t.Fatalf("crossCheck = %q", got)
	}
	events["b"] = ev("b", "needs_review", 422, "label", "enum")
	events["c"] = ev("c", "valid", 200, "")
	if got := crossCheck(rows, events); len(got) != 0 {
		t.Fatalf("crossCheck = %q", got)
	}
}
