package proxy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
)

// The review store keeps a needs_review verdict's code and attempt count
// (dedupeForm), not the 422 itself; another replica renders the 422 from
// the stored item. It must be the body the client was first sent, byte for
// byte, for every shape a 422 takes: each code, no attempt at all,
// violations null or empty, the root path, text JSON escapes (HTML
// characters, quotes, invalid UTF-8, non-ASCII), fractional temperatures,
// and after a rerun appended attempts to the item. An item stored with the
// whole 422 (before session 15) still answers with it.
func TestDedupeAnswerRenderedFromTheItem(t *testing.T) {
	st, err := review.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "reviews.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	odd := contracts.Violation{Kind: "schema", Path: "/a/0/\"b\"", Rule: "enum",
		Message: "got <script>alert('x')</script> & \"more\" \xff\xfe é 日本 \u2028"}
	root := contracts.Violation{Kind: "schema", Path: "", Rule: "required", Message: "missing"}
	att := func(n int, temp float64, shortened bool, finish string, vs []contracts.Violation) ReviewAttempt {
		return ReviewAttempt{Attempt: n, Temperature: temp, Shortened: shortened, FinishReason: finish,
			Usage: audit.Usage{PromptTokens: 11 * n, CompletionTokens: 7, TotalTokens: 11*n + 7}, Violations: vs}
	}
	cases := []struct {
		name     string
		code     ErrorCode
		attempts []ReviewAttempt
		outputs  []string
		rerun    bool
		old      bool // stored as versions before session 15 stored it
	}{
		{name: "two attempts", code: CodeContractViolation,
			attempts: []ReviewAttempt{att(1, 0.7, false, "stop", []contracts.Violation{odd, root}), att(2, 0.1+0.2, true, "length", []contracts.Violation{root})},
			outputs:  []string{`{"a":"<b>"}`, "not json \xff"}},
		{name: "one attempt at the root", code: CodeContractViolation,
			attempts: []ReviewAttempt{att(1, 0, false, "stop", []contracts.Violation{root})}, outputs: []string{"{}"}},
		{name: "violations null and empty", code: CodeContractViolation,
			attempts: []ReviewAttempt{att(1, 1e-7, false, "stop", nil), att(2, 2, false, "content_filter", []contracts.Violation{})},
			outputs:  []string{"", "x"}},
		{name: "budget exhausted before any attempt", code: CodeBudgetExhausted, attempts: []ReviewAttempt{}},
		{name: "budget exhausted after one", code: CodeBudgetExhausted,
			attempts: []ReviewAttempt{att(1, 0.5, false, "length", []contracts.Violation{odd})}, outputs: []string{"{"}},
		{name: "outputs not kept", code: CodeContractViolation,
			attempts: []ReviewAttempt{att(1, 0.7, false, "stop", []contracts.Violation{odd})}},
		{name: "after a rerun", code: CodeContractViolation, rerun: true,
			attempts: []ReviewAttempt{att(1, 0.7, false, "stop", []contracts.Violation{odd}), att(2, 0.3, true, "stop", []contracts.Violation{root})},
			outputs:  []string{"a", "b"}},
		{name: "stored whole before session 15", code: CodeContractViolation, old: true,
			attempts: []ReviewAttempt{att(1, 0.7, false, "stop", []contracts.Violation{odd})}, outputs: []string{"a"}},
	}
	base := time.Now()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "req_" + string(rune('a'+i))
			// As contract() answers and stores it.
			sent := needsReviewError(id, "route_"+c.name, "contract <k>", c.code, c.attempts)
			sent.Review.URL, sent.Review.Stored = "/v1/reviews/"+id, true
			answer := sent.dedupeAnswer()
			if c.old {
				answer = sent.body()
			}
			it := &review.Item{ID: id, Status: review.StatusPending, CreatedAt: base.Add(time.Duration(i) * time.Millisecond),
				Route: sent.Review.Route, Prompt: review.Ref{Name: "p", SHA256: "aa"}, Contract: review.Ref{Name: sent.Review.Contract, SHA256: "bb"},
				KeyID: "k", Input: json.RawMessage(`{}`), Request: json.RawMessage(`{}`), Attempts: storedAttempts(c.attempts, c.outputs, 0),
				Dedupe: &review.Dedupe{Key: id, Until: base.Add(time.Hour), Answer: answer}}
			if _, err := st.Create(context.Background(), it, false); err != nil {
				t.Fatal(err)
			}
			if c.rerun {
				more := storedAttempts([]ReviewAttempt{att(1, 0.9, false, "stop", []contracts.Violation{root})}, []string{"c"}, len(c.attempts))
				if _, err := st.AppendAttempts(context.Background(), id, more); err != nil {
					t.Fatal(err)
				}
			}
			recs, err := st.RecentDedupe(context.Background(), it.CreatedAt, base, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || recs[0].ID != id {
				t.Fatalf("records %+v", recs)
			}
			got, err := renderDedupe(&recs[0])
			if err != nil {
				t.Fatal(err)
			}
			if g, w := string(got.body()), string(sent.body()); g != w {
				t.Fatalf("rendered 422 differs from the one sent:\n got %s\nwant %s", g, w)
			}
			if got.Status != sent.Status || got.Type != sent.Type || got.Code != sent.Code {
				t.Fatalf("rendered %d %s %s, sent %d %s %s", got.Status, got.Type, got.Code, sent.Status, sent.Type, sent.Code)
			}
			if !c.old && len(answer) > 48 {
				t.Fatalf("stored answer is %d bytes (%s), want the short form", len(answer), answer)
			}
		})
	}
}

// A record the proxy cannot answer from is an error (the sync logs it and
// skips the record), not a wrong 422.
func TestDedupeAnswerRenderRefuses(t *testing.T) {
	atts, _ := json.Marshal(storedAttempts([]ReviewAttempt{{Attempt: 1}}, []string{"x"}, 0))
	for _, c := range []struct{ name, answer, attempts string }{
		{"not JSON", `{`, string(atts)},
		{"more attempts than the item holds", `{"code":"contract_violation","attempts":2}`, string(atts)},
		{"a code that is no needs_review", `{"code":"invalid_json","attempts":1}`, string(atts)},
		{"no attempt count", `{"code":"contract_violation"}`, string(atts)},
		{"negative count", `{"code":"contract_violation","attempts":-1}`, string(atts)},
		{"attempts not an array", `{"code":"contract_violation","attempts":1}`, `{}`},
		{"an old body of another type", `{"error":{"type":"invalid_request_error","code":"invalid_json"}}`, string(atts)},
	} {
		r := review.DedupeRecord{ID: "r1", Route: "a", Contract: "k", Attempts: json.RawMessage(c.attempts),
			Dedupe: review.Dedupe{Key: "k", Answer: json.RawMessage(c.answer)}}
		if e, err := renderDedupe(&r); err == nil {
			t.Errorf("%s: rendered %s", c.name, e.body())
		}
	}
}
