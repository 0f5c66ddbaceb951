package proxy

// The reviewer page (/review/) in a real headless Chromium driven through
// chromedp, against the real handlers and a SQLite store: approve and reject
// through the UI (buttons and keys), live validation through /admin/check,
// a wrong admin key, and model/client text holding markup shown as text
// with nothing run. Chromium comes from scripts/chromium.sh (make test runs
// it); a missing browser fails these tests, it never skips them.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/web"
)

// pageSite is a review harness served to a browser, with a counter
// endpoint (/pwned) that an injected payload would call.
type pageSite struct {
	*reviewHarness
	ts     *httptest.Server
	pwned  atomic.Int32 // requests to /pwned*
	checks atomic.Int32 // POST /admin/check
	// hook, when set, sees every request first; true: it answered.
	hook atomic.Pointer[func(w http.ResponseWriter, r *http.Request) bool]
}

// newPageSite serves the page and the API for one test. Everything it
// and newBrowser start is ended by t's cleanups, the browser first, and
// newReviewHarness's goroutine check runs after them all.
func newPageSite(t *testing.T) *pageSite {
	ps := &pageSite{reviewHarness: newReviewHarness(t)}
	api := ps.srv.Handler(&Admin{Reviews: ps.srv.ReviewAdmin()})
	ps.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/pwned"):
			ps.pwned.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		case r.URL.Path == "/admin/check":
			ps.checks.Add(1)
		}
		if h := ps.hook.Load(); h != nil && (*h)(w, r) {
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.ts.Close)
	return ps
}

func (ps *pageSite) close() {
	ps.ts.Close()
	ps.shutdown()
}

// browser is one headless Chromium with one tab, and what the tab did.
type browser struct {
	t      *testing.T
	ctx    context.Context
	cancel func()
	mu     sync.Mutex
	urls   []string // every request the page made
	errs   []string // uncaught exceptions and console errors
}

// chromiumPath is $CONTRACTD_CHROMIUM or /usr/bin/chromium; it must run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CONTRACTD_CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	fi, err := os.Stat(bin)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("no Chromium at %s: run scripts/chromium.sh (make test does), or set CONTRACTD_CHROMIUM", bin)
	}
	return bin
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // as root in a container
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()), // fresh profile every time
		chromedp.WindowSize(1280, 900),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	var once sync.Once
	b.cancel = func() {
		once.Do(func() {
			cancel()
			acancel() // waits for the browser process to exit
		})
	}
	t.Cleanup(b.cancel)
	// The first run starts the browser and lives as long as ctx: bound it
	// with a timer, not a context deadline.
	stop := time.AfterFunc(time.Minute, b.cancel)
	err := chromedp.Do(ctx)
	if !stop.Stop() || err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.urls = append(b.urls, e.Request.URL)
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errs = append(b.errs, fmt.Sprintf("%s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				b.errs = append(b.errs, "console.error")
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// Before any page script: record Content-Security-Policy violations, so
	// a test sees a payload that tried to run even though CSP stopped it.
	b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__csp = []; document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`,
		})
		return err
	}))
	return b
}

// do runs steps with a bounded time; on failure it reports the page's
// error line and what the page logged.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v; page error line %q; page errors %v", err, b.errorLine(), b.pageErrors())
	}
}

func (b *browser) errorLine() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("error")||{}).textContent||""`))
	return s
}

// end fails the test if the page raised an error, then stops the
// browser and the site (before the test's leak check runs).
func (b *browser) end(ps *pageSite) {
	b.t.Helper()
	if errs := b.pageErrors(); len(errs) > 0 {
		b.t.Errorf("page errors: %v", errs)
	}
	b.cancel()
	ps.close()
}

func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// eval returns a JavaScript expression's value.
func evalJS[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// until waits for a JavaScript condition to be truthy.
func (b *browser) until(cond string) {
	b.t.Helper()
	b.untilIn(cond, 15*time.Second)
}

// untilIn is until with its own bound.
func (b *browser) untilIn(cond string, d time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d+5*time.Second)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil {
		b.t.Fatalf("waiting for %s: %v\npage: %s\npage errors: %v", cond, err, b.dump(), b.pageErrors())
	}
}

// dump is the page's state in a line, for failures.
func (b *browser) dump() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		items: [...document.querySelectorAll("#items li .id")].map(e => e.textContent),
		selected: document.getElementById("d-title").textContent,
		check: document.getElementById("check-state").className + " " + document.getElementById("check-state").textContent,
		approveDisabled: document.getElementById("approve").disabled,
		error: document.getElementById("error").textContent,
		notice: document.getElementById("notice").textContent,
		detailHidden: document.getElementById("detail").hidden,
		resolutionHidden: document.getElementById("d-resolution").hidden,
		actionsHidden: document.getElementById("d-actions").hidden})`))
	if err != nil {
		return err.Error()
	}
	return s
}

// open loads the page with the admin key in the fragment (#key=K never
// reaches the server) and waits for the list to settle.
func (b *browser) open(base, key string) {
	b.t.Helper()
	u := base + web.Prefix
	if key != "" {
		u += "#key=" + key
	}
	b.do(chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("#items")))
}

// needsReviews stores n items of classifyReq, oldest first, and returns
// their ids.
func (ps *pageSite) needsReviews(n int) []string {
	ps.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = ps.needsReview(classifyReq)
	}
	return ids
}

// holdDetail holds back the page's requests for item id (GET
// /admin/reviews/id) until release is called or the page gives one up.
// release may be called more than once; t's end calls it. It replaces
// any hook set before.
func (ps *pageSite) holdDetail(id string) (release func()) {
	ps.t.Helper()
	ch := make(chan struct{})
	release = sync.OnceFunc(func() { close(ch) })
	ps.t.Cleanup(release)
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == "GET" && r.URL.Path == "/admin/reviews/"+id {
			select {
			case <-ch:
			case <-r.Context().Done():
			}
		}
		return false
	}
	ps.hook.Store(&hook)
	return release
}

// failDetail answers the page's later requests for item id with the
// review store's 503. It replaces any hook set before.
func (ps *pageSite) failDetail(id string) {
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == "GET" && r.URL.Path == "/admin/reviews/"+id {
			writeError(w, errStoreDown)
			return true
		}
		return false
	}
	ps.hook.Store(&hook)
}

// openAsAnn opens the page with the admin key, waits until it shows item
// id, and types the reviewer name ann: where each test that acts on an
// item through the page starts.
func (b *browser) openAsAnn(base, id string) {
	b.t.Helper()
	b.open(base, adminKey)
	b.until(titleIs(id))
	b.do(chromedp.SendKeys(chromedp.CSS("#reviewer"), "ann"))
}

// openOnTwo stores two items of classifyReq and opens the page as ann
// (openAsAnn) on the newer, which the list shows first: where the tests
// that move between two items start.
func (ps *pageSite) openOnTwo() (b *browser, older, newer string) {
	ps.t.Helper()
	older = ps.needsReview(classifyReq)
	newer = ps.needsReview(classifyReq)
	b = newBrowser(ps.t)
	b.openAsAnn(ps.ts.URL, newer)
	return b, older, newer
}

// selectHeld holds back the detail of item id (holdDetail) and selects id
// with j: the list has id selected while the item before it is still
// shown. release lets the detail load.
func (ps *pageSite) selectHeld(b *browser, id string) (release func()) {
	ps.t.Helper()
	release = ps.holdDetail(id)
	b.key("j")
	b.until(selectedIs(id))
	return release
}

// offOrigin lists requests the page made anywhere but base.
func (b *browser) offOrigin(base string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, u := range b.urls {
		if !strings.HasPrefix(u, base+"/") {
			out = append(out, u)
		}
	}
	return out
}

// typeEditor replaces the editor's text by typing it, as a person would
// (each key fires the input event the live check listens to).
func (b *browser) typeEditor(text string) {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("editor").value = ""`), chromedp.SendKeys(chromedp.CSS("#editor"), text))
}

// key presses a key with the focus on the item list (not in a field).
func (b *browser) key(k string) {
	b.t.Helper()
	b.do(chromedp.Focus(chromedp.CSS("#items")), chromedp.KeyEvent(k))
}

const listLen = `document.querySelectorAll("#items li").length`

// selectedIs holds when the list has item id selected.
func selectedIs(id string) string {
	return fmt.Sprintf(`document.querySelector('#items li[aria-selected="true"] .id').textContent === %q`, id)
}

func selectedID(b *browser) string {
	return evalJS[string](b, `(document.querySelector('#items li[aria-selected="true"] .id')||{}).textContent||""`)
}

func TestReviewPageApproveRejectThroughUI(t *testing.T) {
	ps := newPageSite(t)
	ids := ps.needsReviews(3)
	b := newBrowser(t)

	// The page and its assets: no key needed, a strict CSP on each.
	for _, p := range []string{"", "app.js", "style.css"} {
		r := ps.call("GET", web.Prefix+p, "", "")
		if r.Status != 200 || !strings.Contains(r.Header.Get("Content-Security-Policy"), "default-src 'self'") ||
			strings.Contains(r.Header.Get("Content-Security-Policy"), "unsafe-inline") || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: %d %v", p, r.Status, r.Header)
		}
	}

	b.open(ps.ts.URL, adminKey)
	b.until(listLen + ` === 3`)
	// Newest first, the first selected; the key left the address bar.
	if got := selectedID(b); got != ids[2] {
		t.Fatalf("selected %q, want the newest %q", got, ids[2])
	}
	if h := evalJS[string](b, `location.hash`); h != "" {
		t.Fatalf("hash %q still holds the key", h)
	}
	if k := evalJS[string](b, `sessionStorage.getItem("contractd.adminKey")`); k != adminKey {
		t.Fatalf("sessionStorage key %q", k)
	}
	// The violations beside the output, each path highlighted: the
	// missing summary marks the output's frame, the extra "notes" its member.
	b.until(`document.querySelectorAll("#d-attempts .attempt").length === 2`)
	if n := evalJS[int](b, `document.querySelectorAll("#d-attempts .attempt:first-child .violations li").length`); n < 2 {
		t.Fatalf("%d violations listed", n)
	}
	if hl := evalJS[[]string](b, `[...document.querySelectorAll("#d-attempts .attempt:first-child .hl")].map(e => e.dataset.path)`); !slices.Equal(hl, []string{"/notes"}) {
		t.Fatalf("highlighted paths %q", hl)
	}
	if !evalJS[bool](b, `document.querySelector("#d-attempts .attempt:first-child pre").classList.contains("hl-all")`) {
		t.Fatal("the root violation does not mark the output")
	}
	if txt := evalJS[string](b, `document.querySelector("#d-attempts .hl[data-path='/notes']").textContent`); !strings.Contains(txt, rejectedMarker) {
		t.Fatalf("highlighted /notes is %q", txt)
	}
	// The editor starts from the last output, which fails the live check:
	// approve stays disabled.
	b.until(`document.getElementById("check-state").className === "bad"`)
	if !evalJS[bool](b, `document.getElementById("approve").disabled`) {
		t.Fatal("approve enabled for an invalid output")
	}

	// j / k move the selection.
	b.key("j")
	b.until(selectedIs(ids[1]))
	b.key("k")
	b.until(fmt.Sprintf(`document.getElementById("d-title").textContent === %q`, ids[2]))

	// Correct the output, wait for the live check, approve with the button.
	b.do(chromedp.SendKeys(chromedp.CSS("#reviewer"), "ann"))
	b.typeEditor(validClassify)
	b.until(`document.getElementById("check-state").className === "ok" && !document.getElementById("approve").disabled`)
	b.do(chromedp.SendKeys(chromedp.CSS("#note"), "fixed the summary"), chromedp.Click(chromedp.CSS("#approve")))
	b.until(listLen + ` === 2`)
	b.until(fmt.Sprintf(`document.getElementById("d-title").textContent === %q`, ids[1]))
	it, err := ps.store.Get(context.Background(), ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != review.StatusApproved || it.Resolution.Reviewer != "ann" || it.Resolution.Note != "fixed the summary" ||
		it.Resolution.By != review.ByReviewer || !jsonEq(it.Resolution.Output, validClassify) {
		t.Fatalf("store: %+v %+v", it, it.Resolution)
	}
	if got := evalJS[[]string](b, `[...document.querySelectorAll("#items li .id")].map(e => e.textContent)`); slices.Contains(got, ids[2]) {
		t.Fatalf("approved item still listed: %v", got)
	}

	// Keyboard only: a approves the (valid) correction, r rejects.
	b.typeEditor(validClassify)
	b.until(`!document.getElementById("approve").disabled`)
	b.key("a")
	b.until(listLen + ` === 1`)
	b.until(fmt.Sprintf(`document.getElementById("d-title").textContent === %q`, ids[0]))
	b.key("r")
	b.until(listLen + ` === 0 && !document.getElementById("empty").hidden`)
	for id, want := range map[string]review.Status{ids[1]: review.StatusApproved, ids[0]: review.StatusRejected} {
		it, err := ps.store.Get(context.Background(), id)
		if err != nil || it.Status != want || it.Resolution.Reviewer != "ann" {
			t.Fatalf("%s: %v %+v", id, err, it)
		}
	}
	// The approved filter lists them, resolution shown, no actions.
	b.do(chromedp.SetValue(chromedp.CSS("#f-status"), "approved"), chromedp.Click(chromedp.CSS("#f-apply")))
	b.until(listLen + ` === 2 && !document.getElementById("d-resolution").hidden && document.getElementById("d-actions").hidden`)

	if off := b.offOrigin(ps.ts.URL); len(off) > 0 {
		t.Fatalf("requests off the origin: %v", off)
	}
	b.end(ps)
}

func TestReviewPageLiveCheckInvalidJSON(t *testing.T) {
	ps := newPageSite(t)
	id := ps.needsReview(classifyReq)
	b := newBrowser(t)
	b.openAsAnn(ps.ts.URL, id)

	// Valid first, so the change to invalid is seen.
	b.typeEditor(validClassify)
	b.until(`!document.getElementById("approve").disabled`)
	before := ps.checks.Load()
	b.typeEditor(`{"intent": "claim", "summary": `) // cut short
	b.until(`document.getElementById("check-state").className === "bad" && document.querySelectorAll("#check-violations li").length > 0`)
	if !evalJS[bool](b, `document.getElementById("approve").disabled`) {
		t.Fatal("approve enabled for invalid JSON")
	}
	// The violations are the server's verdict: the same as /admin/check.
	r := ps.call("POST", "/admin/check", `{"route":"classify","output":"{\"intent\": \"claim\", \"summary\": "}`, adminKey)
	var v checkVerdict
	if err := json.Unmarshal(r.Body, &v); err != nil || r.Status != 200 || v.Valid || len(v.Violations) == 0 {
		t.Fatalf("check: %d %s", r.Status, r.Body)
	}
	shown := evalJS[[]string](b, `[...document.querySelectorAll("#check-violations li .rule")].map(e => e.textContent)`)
	if len(shown) != len(v.Violations) || shown[0] != v.Violations[0].Rule {
		t.Fatalf("shown rules %v, /admin/check says %+v", shown, v.Violations)
	}
	// Typed key by key: fewer checks than keys (how many depends on the
	// gaps between keys on a loaded machine).
	if n := ps.checks.Load() - before; n < 1 || n >= 20 {
		t.Fatalf("%d checks for %d keys typed", n, 31)
	}
	// Debounced: 40 edits within one pause make exactly one check, of the
	// final text.
	before = ps.checks.Load()
	b.do(chromedp.Evaluate[chromedp.Void](`(() => { const ed = document.getElementById("editor");
		for (let i = 1; i <= 40; i++) { ed.value = '{"intent": "claim", "summary": "s' + i; ed.dispatchEvent(new Event("input")); } })()`))
	for deadline := time.Now().Add(10 * time.Second); ps.checks.Load() == before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // past the debounce: a second check would have started
	if n := ps.checks.Load() - before; n != 1 {
		t.Fatalf("%d checks for one burst of 40 edits", n)
	}
	// a does nothing while approve is disabled; the item stays pending.
	b.key("a")
	time.Sleep(200 * time.Millisecond)
	if it, err := ps.store.Get(context.Background(), id); err != nil || it.Status != review.StatusPending {
		t.Fatalf("%v %+v", err, it)
	}
	// JSON with prose around it passes the contract as model text, but
	// approve needs the JSON alone: still disabled.
	b.typeEditor(`Sure: ` + validClassify)
	b.until(`document.getElementById("check-state").className === "bad"`)
	if !evalJS[bool](b, `document.getElementById("approve").disabled`) {
		t.Fatal("approve enabled for prose")
	}
	b.end(ps)
}

func TestReviewPageWrongAdminKey(t *testing.T) {
	ps := newPageSite(t)
	ps.needsReview(classifyReq)
	b := newBrowser(t)

	for _, key := range []string{"wrong-key", ""} {
		b.do(chromedp.Navigate("about:blank"))
		b.open(ps.ts.URL, key)
		if key == "" {
			// Forget the key the first round stored, then load the page
			// again with a navigation chromedp waits for (a reload from
			// script raced the next evaluation into a destroyed context).
			b.do(chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`))
			b.do(chromedp.Navigate("about:blank"))
			b.open(ps.ts.URL, "")
		}
		b.until(`!document.getElementById("error").hidden`)
		msg := evalJS[string](b, `document.getElementById("error").textContent`)
		if !strings.Contains(msg, "admin key was refused") || !strings.Contains(msg, "invalid_api_key") {
			t.Fatalf("key %q: error line %q", key, msg)
		}
		if n := evalJS[int](b, listLen); n != 0 {
			t.Fatalf("key %q: %d items listed", key, n)
		}
		if f := evalJS[bool](b, `document.activeElement === document.getElementById("key")`); !f {
			t.Fatalf("key %q: the key field is not focused", key)
		}
	}
	// Typing the right key into the form lists the item and clears the error.
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("key").value = ""`), chromedp.SendKeys(chromedp.CSS("#key"), adminKey), chromedp.Click(chromedp.CSS("#key-save")))
	b.until(listLen + ` === 1 && document.getElementById("error").hidden`)
	b.cancel()
	ps.close()
}

// Payloads in the model's output, in the client's input and (through a
// property name) in the violations: all shown as the characters they are.
const (
	xssScript = `<script>window.__pwned='script';fetch('/pwned/script')</script>`
	xssImg    = `<img src=/pwned/img onerror="window.__pwned='img';fetch('/pwned/onerror')">`
	xssClose  = `</pre></span><svg onload="window.__pwned='svg'"><img src=x onerror=window.__pwned=1>`
)

func TestReviewPageShowsMarkupAsText(t *testing.T) {
	ps := newPageSite(t)
	js := func(v string) string { // JSON text as a model writes it: no \u003c escapes
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		return strings.TrimSpace(buf.String())
	}
	out1 := `{"intent": ` + js(xssScript) + `, ` + js(xssImg) + `: ` + js(xssClose) + `}`
	out2 := `Here you go ` + xssImg + ` {"intent": "claim"} ` + xssScript
	input := `{"subject": ` + js(xssScript) + `, "body": ` + js(xssImg) + `}`
	it := &review.Item{ID: "req_markup_1", Status: review.StatusPending, CreatedAt: time.Now().UTC(), Route: "classify",
		Prompt: review.Ref{Name: "classify"}, Contract: review.Ref{Name: "classify_v1"},
		Input: json.RawMessage(input), Request: json.RawMessage(classifyReq),
		Attempts: []review.Attempt{
			{Output: out1, AttemptReport: review.AttemptReport{Attempt: 1, Temperature: 0.7, FinishReason: "stop", Violations: []contracts.Violation{
				{Kind: "schema", Path: "/" + pointerToken(xssImg), Rule: "additionalProperties", Message: `additional property "` + xssImg + `" is not allowed`},
				{Kind: "schema", Path: "", Rule: "required", Message: `required property "summary" is missing`}}}},
			{Output: out2, AttemptReport: review.AttemptReport{Attempt: 2, Temperature: 0, FinishReason: "stop", Violations: []contracts.Violation{
				{Kind: "parse", Path: "", Rule: "json", Message: "prose around " + xssScript}}}},
		}}
	if _, err := ps.store.Create(context.Background(), it, false); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.open(ps.ts.URL, adminKey)
	b.until(`document.getElementById("d-title").textContent === "req_markup_1" && document.querySelectorAll("#d-attempts .attempt").length === 2`)
	b.until(`document.getElementById("check-state").className !== ""  && document.getElementById("check-state").textContent !== "checking…"`)

	// The text is there verbatim, as text.
	for _, c := range []struct{ sel, want string }{
		{"#d-attempts .attempt:nth-child(1) pre", xssScript},
		{"#d-attempts .attempt:nth-child(1) pre", `"` + strings.ReplaceAll(xssImg, `"`, `\"`) + `"`},
		{"#d-attempts .attempt:nth-child(1) pre", `</pre></span><svg onload=`},
		{"#d-attempts .attempt:nth-child(2) pre", "Here you go " + xssImg + " {"},
		{"#d-attempts .attempt:nth-child(2) pre", "} " + xssScript},
		{"#d-attempts .attempt:nth-child(1) .violations", xssImg},
		{"#d-attempts .attempt:nth-child(2) .violations", xssScript},
		{"#d-input", xssScript},
	} {
		got := evalJS[string](b, `document.querySelector(`+js(c.sel)+`).innerText`)
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.sel, got, c.want)
		}
	}
	if ed := evalJS[string](b, `document.getElementById("editor").value`); ed != out2 {
		t.Errorf("editor %q, want the last output %q", ed, out2)
	}
	// The member named by the payload is the one highlighted.
	if hl := evalJS[string](b, `document.querySelector("#d-attempts .attempt:nth-child(1) .m.hl").dataset.path`); hl != "/"+pointerToken(xssImg) {
		t.Errorf("highlighted %q", hl)
	}
	// Nothing became markup, nothing ran, nothing was fetched, and nothing
	// even tried (no CSP violation).
	if n := evalJS[int](b, `document.querySelectorAll("main script, main img, main svg, main iframe").length`); n != 0 {
		t.Errorf("%d elements made from the payload", n)
	}
	time.Sleep(300 * time.Millisecond) // let any image load or fetch land
	if p := evalJS[string](b, `String(window.__pwned)`); p != "undefined" {
		t.Errorf("payload ran: window.__pwned = %s", p)
	}
	if csp := evalJS[[]string](b, `window.__csp`); len(csp) != 0 {
		t.Errorf("CSP violations: %v", csp)
	}
	if n := ps.pwned.Load(); n != 0 {
		t.Errorf("%d requests to /pwned", n)
	}
	// The counter works: the page can reach it when asked to.
	b.do(chromedp.Evaluate[chromedp.Void](`fetch("/pwned/probe")`, chromedp.EvalAwaitPromise))
	if n := ps.pwned.Load(); n != 1 {
		t.Errorf("probe: %d requests to /pwned", n)
	}
	b.end(ps)
}

// TestReviewPageScreenshot renders the page with a pending item and a
// correction typed in. With CONTRACTD_SCREENSHOT=path it writes the PNG
// there (docs/review-page.png is made this way:
// CONTRACTD_SCREENSHOT=$PWD/docs/review-page.png go test -run Screenshot ./proxy/).
func TestReviewPageScreenshot(t *testing.T) {
	ps := newPageSite(t)
	ps.needsReview(classifyReq)
	id := ps.needsReview(`{"model":"classify","messages":[{"role":"user","content":"{\"subject\":\"Invoice 4411\",\"body\":\"I was charged twice for March.\"}"}]}`)
	b := newBrowser(t)
	b.openAsAnn(ps.ts.URL, id)
	b.typeEditor(`{"intent": "billing", "summary": "charged twice in March"}`)
	b.until(`document.getElementById("check-state").className === "ok"`)
	b.do(chromedp.Focus(chromedp.CSS("#d-attempts .violations li:last-child"))) // its path lit up
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 10000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot: %d bytes", len(png))
	}
	if out := os.Getenv("CONTRACTD_SCREENSHOT"); out != "" {
		if err := os.WriteFile(filepath.Clean(out), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", out, len(png))
	}
	b.cancel()
	ps.close()
}

func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func jsonEq(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func TestReviewPageRerun(t *testing.T) {
	ps := newPageSite(t)
	b, other, id := ps.openOnTwo()
	b.until(`document.querySelectorAll("#d-attempts .attempt").length === 2`)

	// u: the rerun still fails; the item stays, its new attempts shown (3, 4).
	b.key("u")
	b.until(`document.querySelectorAll("#d-attempts .attempt").length === 4`)
	if h := evalJS[string](b, `document.querySelector("#d-attempts .attempt:nth-child(4) h4").textContent`); !strings.HasPrefix(h, "Attempt 4 ") {
		t.Fatalf("last attempt %q", h)
	}
	if n := evalJS[int](b, listLen); n != 2 {
		t.Fatalf("%d items after a failing rerun", n)
	}
	// The model now answers well: the rerun button approves it by rerun.
	ps.valid.Store(true)
	b.do(chromedp.Click(chromedp.CSS("#rerun")))
	b.until(listLen + ` === 1`)
	b.until(fmt.Sprintf(`document.getElementById("d-title").textContent === %q`, other))
	it, err := ps.store.Get(context.Background(), id)
	if err != nil || it.Status != review.StatusApproved || it.Resolution.By != review.ByRerun || len(it.Attempts) < 5 {
		t.Fatalf("%v %+v", err, it)
	}
	if n := evalJS[string](b, `document.getElementById("notice").textContent`); !strings.Contains(n, "approved by rerun") {
		t.Fatalf("notice %q", n)
	}
	b.end(ps)
}

func TestReviewPageFiltersAndPaging(t *testing.T) {
	ps := newPageSite(t)
	now := addPendingItems(t, ps, "req_page", 52, "required")
	addPendingItem(t, ps, "req_free_1", "free", "secret", now.Add(-100*time.Second))
	addPendingItem(t, ps, "req_free_2", "free", "secret", now.Add(-101*time.Second))
	addPendingItem(t, ps, "req_old_1", "classify", "required", now.Add(-72*time.Hour))

	b := newBrowser(t)
	b.open(ps.ts.URL, adminKey)
	// One page of 50, newest first, then the rest through Load more.
	b.until(listLen + ` === 50 && !document.getElementById("more").hidden`)
	if id := selectedID(b); id != "req_page_00" {
		t.Fatalf("first item %q", id)
	}
	b.do(chromedp.Click(chromedp.CSS("#more")))
	b.until(listLen + ` === 55 && document.getElementById("more").hidden`)

	filter := func(route, rule, since string) {
		b.t.Helper()
		b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("f-route").value = %q;
			document.getElementById("f-rule").value = %q; document.getElementById("f-since").value = %q`, route, rule, since)),
			chromedp.Click(chromedp.CSS("#f-apply")))
	}
	ids := func() []string {
		return evalJS[[]string](b, `[...document.querySelectorAll("#items li .id")].map(e => e.textContent)`)
	}
	filter("free", "", "")
	b.until(listLen + ` === 2`)
	if got := ids(); !slices.Equal(got, []string{"req_free_1", "req_free_2"}) {
		t.Fatalf("route=free: %v", got)
	}
	filter("", "secret", "")
	b.until(listLen + ` === 2 && document.querySelector("#items li .id").textContent === "req_free_1"`)
	// since=24h: newest first, so the list ends at the first older item,
	// on the second page too.
	filter("classify", "", "24h")
	b.until(listLen + ` === 50 && !document.getElementById("more").hidden`)
	b.do(chromedp.Click(chromedp.CSS("#more")))
	b.until(listLen + ` === 52 && document.getElementById("more").hidden`)
	if got := ids(); slices.Contains(got, "req_old_1") {
		t.Fatal("since=24h lists the 72h old item")
	}
	// A bad since is refused on the page, before any request: a number
	// without its unit too (Date.parse read "5" as May 2001: no filter).
	for _, since := range []string{"yesterday-ish", "5", "May 5"} {
		filter("", "", "")
		b.until(listLen + ` === 50 && document.getElementById("error").hidden`)
		filter("", "", since)
		b.until(`document.getElementById("error").textContent.startsWith("Since:")`)
	}
	// Keyboard: / goes to the filters.
	b.key("/")
	if !evalJS[bool](b, `document.activeElement === document.getElementById("f-route")`) {
		t.Fatal("/ does not focus the filters")
	}
	b.end(ps)
}
