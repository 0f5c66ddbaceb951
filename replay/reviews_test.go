package replay

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
)

// The review tests run against every store, through review.Store only.
func TestMain(m *testing.M) { os.Exit(testkit.PostgresMain(m)) }

func openStores(t *testing.T) map[string]review.Store {
	t.Helper()
	ctx := context.Background()
	sq := storetest.OpenSQLite(t, filepath.Join(t.TempDir(), "reviews.db"))
	pg, err := review.OpenPostgres(ctx, testkit.PostgresDSN(t), review.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	return map[string]review.Store{"sqlite": sq, "postgres": pg}
}

// storedItem makes a review item as serving stores one: the request body,
// the input, and each attempt's output with the violations rt's contract
// gives it.
func storedItem(t *testing.T, rt *config.Runtime, id string, created time.Time, marker string, outs ...string) *review.Item {
	t.Helper()
	route := rt.Routes["classify"]
	body := requestBody(0, marker)
	var req struct {
		Input json.RawMessage `json:"contract_input"`
	}
	_ = json.Unmarshal([]byte(body), &req)
	subj, aerr := proxy.RequestSubject(route, []byte(body))
	if aerr != nil {
		t.Fatal(aerr)
	}
	it := &review.Item{ID: id, Status: review.StatusPending, CreatedAt: created, Route: "classify",
		Prompt: review.Ref{Name: "classify", SHA256: route.Prompt.SHA256}, Contract: review.Ref{Name: "classify_v1", SHA256: route.Contract.SHA256},
		Input: req.Input, Request: json.RawMessage(body)}
	for i, o := range outs {
		v := proxy.Judge(route.Contract, o, "stop", false, &subj)
		it.Attempts = append(it.Attempts, review.Attempt{AttemptReport: review.AttemptReport{Attempt: i + 1, Temperature: 0.5, FinishReason: "stop",
			Violations: v.Violations}, OutputSHA256: "x", Output: o})
	}
	return it
}

// fillStore stores: a pending item (two invalid attempts), an item a
// reviewer approved with a long summary, an item approved by a rerun (its
// valid attempt 3), and a rejected one.
func fillStore(t *testing.T, st review.Store, rt *config.Runtime) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	items := []*review.Item{
		storedItem(t, rt, "req_pending", now.Add(-3*time.Hour), "BADWORD", outputs["BADWORD"], outputs["BADWORD"]),
		storedItem(t, rt, "req_approved", now.Add(-2*time.Hour), "EXTRA", outputs["EXTRA"], outputs["EXTRA"]),
		storedItem(t, rt, "req_rerun", now.Add(-1*time.Hour), "EXTRA", outputs["EXTRA"], outputs["EXTRA"], outputs["SHORT"]),
		storedItem(t, rt, "req_rejected", now.Add(-30*24*time.Hour), "BADWORD", outputs["BADWORD"]),
	}
	for _, it := range items {
		if _, err := st.Create(ctx, it, false); err != nil {
			t.Fatal(err)
		}
	}
	resolve := func(id string, status review.Status, by review.ResolvedBy, out string, at time.Time) {
		t.Helper()
		o := json.RawMessage("null")
		if out != "" {
			o = json.RawMessage(out)
		}
		if _, err := st.Resolve(ctx, id, review.Resolve{Status: status, At: at, Resolution: review.Resolution{By: by, Reviewer: "ann", Output: o}}); err != nil {
			t.Fatal(err)
		}
	}
	resolve("req_approved", review.StatusApproved, review.ByReviewer, outputs["LONG"], now.Add(-90*time.Minute))
	resolve("req_rerun", review.StatusApproved, review.ByRerun, outputs["SHORT"], now.Add(-30*time.Minute))
	resolve("req_rejected", review.StatusRejected, review.ByReviewer, "", now.Add(-29*24*time.Hour))
}

func runReviews(t *testing.T, o Options, st review.Store) (*Summary, string, string) {
	t.Helper()
	return runReplay(t, o, func(o Options) (*Summary, error) { return Reviews(context.Background(), o, st) })
}

// TestReviewsSource: --reviews judges every attempt's output and every
// approved output of the store, whichever backend it is; a tightened
// schema names the approved output it would reject and exits 1.
func TestReviewsSource(t *testing.T) {
	for name, st := range openStores(t) {
		t.Run(name, func(t *testing.T) {
			_, rt := writeConfig(t, t.TempDir(), cfgOpts{})
			fillStore(t, st, rt)
			s, out, errb := runReviews(t, Options{Runtime: rt}, st)
			// Attempts: 2 + 2 + 3 + 1 = 8 (1 valid), approved outputs: 2.
			want := Counts{Items: 10, StillValid: 3, StillInvalid: 7}
			if s.Total != want || s.ExitCode() != ExitOK {
				t.Fatalf("total %+v, want %+v\n%s%s", s.Total, want, out, errb)
			}
			_, tight := writeConfig(t, t.TempDir(), cfgOpts{schema: tightSchema})
			s, out, _ = runReviews(t, Options{Runtime: tight}, st)
			if s.ExitCode() != ExitRegressed || s.Total.NewlyInvalid != 1 ||
				!strings.Contains(out, "req_approved#approved classify approved -> invalid: maxLength at /summary") {
				t.Fatalf("exit %d total %+v\n%s", s.ExitCode(), s.Total, out)
			}
			// --since keeps what was resolved (or created, pending) since.
			s, _, _ = runReviews(t, Options{Runtime: tight, Since: time.Now().Add(-100 * time.Minute)}, st)
			if s.Total.Items != 3+4 { // req_approved (2 attempts + approved), req_rerun (3 + approved)
				t.Fatalf("--since: total %+v", s.Total)
			}
			// --json names each item once.
			_, out, _ = runReviews(t, Options{Runtime: rt, JSON: true}, st)
			items, _ := jsonItems(t, out)
			seen := map[string]bool{}
			for _, it := range items {
				if seen[it.ID] {
					t.Errorf("item %s twice", it.ID)
				}
				seen[it.ID] = true
			}
			for _, id := range []string{"req_pending#1", "req_pending#2", "req_rerun#3", "req_rerun#approved", "req_approved#approved", "req_rejected#1"} {
				if !seen[id] {
					t.Errorf("no item %s in %v", id, seen)
				}
			}
		})
	}
}
