package proxy

// The reviewer page keeping its state true to the server's: a failed live
// check is checked again by itself, j walks past the loaded page into the
// next one, e acts only on the item shown, and the list's rule summary
// follows a rerun's attempts.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
)

// /admin/check failing (the connection dropped, then 503) shows a "check
// failed" state with approve disabled, and the check is sent again without
// any typing until it answers: approve is then enabled by the verdict.
// Before, the failure stayed on screen until the reviewer typed again.
func TestReviewPageCheckRetriesAfterFailure(t *testing.T) {
	ps := newPageSite(t)
	id := ps.needsReview(classifyReq)
	var down atomic.Bool
	var failed atomic.Int32
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/admin/check" || !down.Load() {
			return false
		}
		if failed.Add(1)%2 == 1 {
			// The server gone mid-request: the page's fetch rejects.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return true
				}
			}
		}
		writeError(w, errStoreDown)
		return true
	}
	ps.hook.Store(&hook)
	b := newBrowser(t)
	b.open(ps.ts.URL, adminKey)
	b.until(titleIs(id) + ` && document.getElementById("check-state").className === "bad"`)
	b.do(chromedp.SendKeys(chromedp.CSS("#reviewer"), "ann"))

	down.Store(true)
	b.typeEditor(validClassify)
	b.until(`document.getElementById("check-state").textContent.startsWith("check failed")`)
	if !evalJS[bool](b, `document.getElementById("approve").disabled`) {
		t.Fatalf("approve enabled after a failed check: %s", b.dump())
	}
	// a does nothing meanwhile.
	b.key("a")
	// Checked again with no typing: the failures go on counting.
	seen := failed.Load()
	for deadline := time.Now().Add(10 * time.Second); failed.Load() < seen+2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := failed.Load() - seen; n < 2 {
		t.Fatalf("%d checks sent after the failure without typing, want it checked again: %s", n, b.dump())
	}
	if msg := evalJS[string](b, `document.getElementById("check-state").textContent`); !strings.Contains(msg, "check failed") ||
		!strings.Contains(msg, "checking again") {
		t.Fatalf("check state %q", msg)
	}
	if it, err := ps.store.Get(context.Background(), id); err != nil || it.Status != review.StatusPending {
		t.Fatalf("approved while the check failed: %v %+v", err, it)
	}
	// The server is back: the next retry's verdict enables approve.
	down.Store(false)
	b.untilIn(`document.getElementById("check-state").className === "ok" && !document.getElementById("approve").disabled`, 20*time.Second)
	b.key("a")
	b.until(listLen + ` === 0`)
	if it, err := ps.store.Get(context.Background(), id); err != nil || it.Status != review.StatusApproved {
		t.Fatalf("%v %+v", err, it)
	}
	b.end(ps)
}

// j (and ↓) on the last loaded item loads the next page, as Load more
// does, and selects the item after it; at the very end it does nothing.
func TestReviewPageNextLoadsNextPage(t *testing.T) {
	ps := newPageSite(t)
	b := ps.openOnFirstPage("req_next", 53)
	b.until(titleIs("req_next_00"))
	b.do(chromedp.Click(chromedp.CSS("#item-49")))
	b.until(titleIs("req_next_49"))
	b.key("j")
	b.until(listLen + ` === 53 && document.getElementById("more").hidden`)
	b.until(titleIs("req_next_50"))
	if id := selectedID(b); id != "req_next_50" {
		t.Fatalf("selected %q after j past the page", id)
	}
	b.do(chromedp.Focus(chromedp.CSS("#items")), chromedp.KeyEvent(kb.ArrowDown))
	b.until(titleIs("req_next_51"))
	b.key("j")
	b.until(titleIs("req_next_52"))
	b.key("j") // the end: nothing more
	time.Sleep(300 * time.Millisecond)
	if n, id := evalJS[int](b, listLen), selectedID(b); n != 53 || id != "req_next_52" {
		t.Fatalf("j at the end: %d items, %q selected", n, id)
	}
	b.end(ps)
}

// e while the selected item loads does not focus the editor of the item
// still on screen (typing there would edit the wrong item); once the item
// is shown, e focuses its editor.
func TestReviewPageEditKeyWaitsForItem(t *testing.T) {
	ps := newPageSite(t)
	b, older, _ := ps.openOnTwo()
	release := ps.selectHeld(b, older)
	b.do(chromedp.KeyEvent("e"))
	time.Sleep(200 * time.Millisecond)
	if f := evalJS[string](b, focused); f != "items" {
		t.Fatalf("e while %s loads put the focus on %s (the detail shows %q)", older, f, evalJS[string](b, `document.getElementById("d-title").textContent`))
	}
	release()
	b.until(titleIs(older))
	b.do(chromedp.KeyEvent("e"))
	b.until(`document.activeElement === document.getElementById("editor")`)
	b.end(ps)
}

// A rerun that still fails adds attempts with other rules: the list's
// rule summary of the item shows them (before, it kept the rules of the
// attempts the list was read with).
func TestReviewPageRuleSummaryAfterRerun(t *testing.T) {
	ps := newPageSite(t)
	addPendingItem(t, ps, "req_rules_1", "classify", "enum", time.Now().UTC())
	b := newBrowser(t)
	b.open(ps.ts.URL, adminKey)
	b.until(titleIs("req_rules_1") + ` && !document.getElementById("rerun").disabled`)
	const rules = `document.querySelector('#items li[aria-selected="true"] .rules').textContent`
	if got := evalJS[string](b, rules); got != "enum" {
		t.Fatalf("rule summary %q before the rerun", got)
	}
	b.key("u")
	b.until(`document.querySelectorAll("#d-attempts .attempt").length === 3`)
	it, err := ps.store.Get(context.Background(), "req_rules_1")
	if err != nil || it.Status != review.StatusPending || len(it.Attempts) != 3 {
		t.Fatalf("%v %+v", err, it)
	}
	var want []string
	for _, a := range it.Attempts {
		for _, v := range a.Violations {
			if !strings.Contains(strings.Join(want, "\x00")+"\x00", v.Rule+"\x00") {
				want = append(want, v.Rule)
			}
		}
	}
	if len(want) < 2 {
		t.Fatalf("the rerun added no rule: %v", want)
	}
	b.until(fmt.Sprintf(`%s === %q`, rules, strings.Join(want, ", ")))
	// Read again from the server (j, k), the summary is the same.
	b.key("k")
	b.until(fmt.Sprintf(`%s === %q && %s`, rules, strings.Join(want, ", "), titleIs("req_rules_1")))
	b.end(ps)
}

// addPendingItem stores a pending item of route (the classify contract)
// made at at, whose one attempt has one violation, of rule, at /intent.
// addPendingItems stores n pending classify items, prefix_00 the newest
// (now) and each next one a second older, for the list's paging (a page
// holds 50); it returns now.
func addPendingItems(t *testing.T, ps *pageSite, prefix string, n int, rule string) time.Time {
	t.Helper()
	now := time.Now().UTC()
	for i := range n {
		addPendingItem(t, ps, fmt.Sprintf("%s_%02d", prefix, i), "classify", rule, now.Add(-time.Duration(i)*time.Second))
	}
	return now
}

// openOnFirstPage stores n pending items, more than a page, as
// addPendingItems (rule enum) and opens the page: it lists the first 50,
// Load more shown.
func (ps *pageSite) openOnFirstPage(prefix string, n int) *browser {
	ps.t.Helper()
	addPendingItems(ps.t, ps, prefix, n, "enum")
	b := newBrowser(ps.t)
	b.open(ps.ts.URL, adminKey)
	b.until(listLen + ` === 50 && !document.getElementById("more").hidden`)
	return b
}

func addPendingItem(t *testing.T, ps *pageSite, id, route, rule string, at time.Time) {
	t.Helper()
	it := &review.Item{ID: id, Status: review.StatusPending, CreatedAt: at, Route: route,
		Prompt: review.Ref{Name: "classify"}, Contract: review.Ref{Name: "classify_v1"}, Input: json.RawMessage(`"hi"`),
		Request: json.RawMessage(classifyReq), Attempts: []review.Attempt{{Output: `{"intent":"x"}`,
			AttemptReport: review.AttemptReport{Attempt: 1, Violations: []contracts.Violation{{Kind: "schema", Path: "/intent", Rule: rule, Message: "m"}}}}}}
	if _, err := ps.store.Create(context.Background(), it, false); err != nil {
		t.Fatal(err)
	}
}

// An item's own fetch arriving after the reviewer has started typing (j
// then k back before j's and k's fetches return, the editor already on
// screen) keeps what was typed and checks it, rather than putting the
// model's output back: before, the late fetch reset the editor and the
// live check then judged the model's output, so approve stayed disabled
// for the text the reviewer saw being replaced.
func TestReviewPageLateFetchKeepsTheEdit(t *testing.T) {
	ps := newPageSite(t)
	ids := ps.needsReviews(2)
	var slow atomic.Bool
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		if slow.Load() && r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/admin/reviews/req_") {
			time.Sleep(1500 * time.Millisecond)
		}
		return false
	}
	ps.hook.Store(&hook)
	b := newBrowser(t)
	b.open(ps.ts.URL, adminKey)
	b.until(titleIs(ids[1]) + ` && document.getElementById("check-state").className === "bad"`)
	b.do(chromedp.SendKeys(chromedp.CSS("#reviewer"), "ann"))

	slow.Store(true)
	b.key("j")
	b.key("k")
	b.typeEditor(validClassify)
	// Both fetches come back after the typing: k's is the item on screen.
	time.Sleep(3500 * time.Millisecond)
	slow.Store(false)
	if v := evalJS[string](b, `document.getElementById("editor").value`); v != validClassify {
		t.Fatalf("editor holds %q after the item's late fetch, want what was typed", v)
	}
	b.until(titleIs(ids[1]) + ` && document.getElementById("check-state").className === "ok" && !document.getElementById("approve").disabled`)
	b.do(chromedp.Click(chromedp.CSS("#approve")))
	b.until(listLen + ` === 1`)
	if it, err := ps.store.Get(context.Background(), ids[1]); err != nil || it.Status != review.StatusApproved || !jsonEq(it.Resolution.Output, validClassify) {
		t.Fatalf("%v %+v", err, it)
	}
	b.end(ps)
}
