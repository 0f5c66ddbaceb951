package review

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
)

// A needs_review item stored alone commits about 11 pages to the WAL: the
// reviews row (a leaf of its own, and its parent), its id, the three list
// indexes that hold pending items, its two rule rows (one b-tree, keyed in
// the rule filter's order), and page 1. Each b-tree a new item enters adds
// a page or so, and a commit's latency is mostly those writes; before
// migration 0010 (the rule rows also in a table keyed by item) it was
// 12.7, before 0009 (three more indexes, and the resolution index holding
// pending items too) 19.3 (docs/benchmarks.md, sessions 12 and 14).
func TestSQLitePagesPerItem(t *testing.T) {
	s, err := openSQLite(context.Background(), filepath.Join(t.TempDir(), "reviews.db"), time.Hour, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const warm, n = 300, 1000
	for i := range warm + n {
		if i == warm {
			if _, err := s.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Create(context.Background(), benchLikeItem(time.Now()), false); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(s.file + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	pages := float64((fi.Size()-walHeader)/(s.pageSize+walFrameHeader)) / n
	t.Logf("%.2f pages per item", pages)
	if pages > 12 {
		t.Errorf("%.2f pages written to the WAL per item stored alone, want at most 12", pages)
	}
}

// benchLikeItem is an item the size of the proxy benchmark's (2.4 KB): a
// random request id, two failed attempts breaking two rules.
func benchLikeItem(at time.Time) *Item {
	var r [12]byte
	_, _ = rand.Read(r[:])
	vs := []contracts.Violation{{Kind: "schema", Path: "/intent", Rule: "required", Message: "missing property"},
		{Kind: "schema", Path: "/extra", Rule: "additionalProperties", Message: "additional property"}}
	out := `{"extra":"` + strings.Repeat("z", 300) + `"}`
	return &Item{ID: "req_" + hex.EncodeToString(r[:]), Status: StatusPending, CreatedAt: at, Route: "classify",
		Prompt: Ref{Name: "classify", SHA256: strings.Repeat("a", 64)}, Contract: Ref{Name: "intent", SHA256: strings.Repeat("b", 64)},
		KeyID: "0123456789ab", Input: []byte(`{"body":"` + strings.Repeat("x", 500) + `"}`),
		Request: []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("y", 700) + `"}]}`),
		Attempts: []Attempt{
			{AttemptReport: AttemptReport{Attempt: 1, Temperature: 0.7, FinishReason: "stop", Usage: audit.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, Violations: vs}, OutputSHA256: strings.Repeat("c", 64), Output: out},
			{AttemptReport: AttemptReport{Attempt: 2, FinishReason: "stop", Violations: vs}, OutputSHA256: strings.Repeat("c", 64), Output: out},
		}}
}
