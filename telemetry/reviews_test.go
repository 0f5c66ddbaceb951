package telemetry_test

// The review queue's metrics move with the events they count:
// contractd_reviews_resolved_total{route,status,by} per approve, reject and
// rerun through the admin API; contractd_webhook_deliveries_total{result}
// per delivery try (success, failure, expired); contractd_reviews_pending
// read from the store. Real handlers, a SQLite store, a real webhook
// receiver, and the Prometheus exposition as /metrics serves it.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/review/storetest"
	"github.com/contractd/contractd/telemetry"
)

// metricValue is the value of the sample of name whose labels include
// every one of labels (0 when there is none).
func metricValue(t *testing.T, exposition, name string, labels ...string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(line, labels[i]+`="`+labels[i+1]+`"`) {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		return v
	}
	return 0
}

type reviewSite struct {
	t     *testing.T
	tel   *telemetry.Telemetry
	q     *proxy.ReviewQueue
	store review.Store
	api   *httptest.Server
	valid atomic.Bool // the upstream answers a valid output
}

func newReviewSite(t *testing.T) *reviewSite {
	rs := &reviewSite{t: t}
	up := testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
		content := `{"intent":"nonsense"}` // a label violation at every temperature
		if rs.valid.Load() {
			content = `{"intent":"other"}`
		}
		testkit.Reply(w, http.StatusOK, testkit.Completion{ID: "chatcmpl-fake", Model: "gpt-test-0613",
			Content: content, PromptTokens: upPrompt, CompletionTokens: upCompletion}.JSON())
	})
	t.Setenv(clientEnv, clientKey)
	rt := testkit.LoadRuntime(t, "/tmp/teltest/contractd.yaml", fmt.Sprintf(testConfig, false, up.RootURL(), testkit.ClassifyPrompt("Classify the email.")))
	rt.Review.DedupeWindow = 0 // several items of one body
	logger := slog.New(slog.DiscardHandler)
	srv := proxy.NewServer(rt, proxy.NewCaller(func(*config.Upstream) string { return upstreamKey }), audit.NewWriter(io.Discard), logger)
	tel, err := telemetry.New(telemetry.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	rs.tel = tel
	st := storetest.OpenSQLite(t, filepath.Join(t.TempDir(), "reviews.db"))
	rs.store = st
	rs.q = proxy.NewReviewQueue(context.Background(), func(context.Context) (review.Store, error) { return st, nil },
		filepath.Join(t.TempDir(), "review-spool.jsonl"), logger)
	rs.q.Retry = 10 * time.Millisecond
	rs.q.Webhook = true
	rm, err := tel.ReviewMetrics(func(ctx context.Context) (map[string]int, error) { return st.Pending(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	rs.q.Metrics = rm
	srv.Reviews = rs.q
	srv.Telemetry = tel
	rs.api = httptest.NewServer(srv.Handler(&proxy.Admin{Reviews: srv.ReviewAdmin()}))
	t.Cleanup(func() {
		rs.api.Close()
		_ = st.Close()
		_ = tel.Shutdown(context.Background())
	})
	return rs
}

func (rs *reviewSite) post(path, body string) (int, string) {
	rs.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, rs.api.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := rs.api.Client().Do(req)
	if err != nil {
		rs.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// needsReview makes a stored item and returns its id.
func (rs *reviewSite) needsReview() string {
	rs.t.Helper()
	status, body := rs.post("/v1/chat/completions", rawContractBody("classify", scenarioInput("metrics")))
	if status != 422 || !strings.Contains(body, `"stored":true`) {
		rs.t.Fatalf("%d %s", status, body)
	}
	i := strings.Index(body, `"id":"`) + len(`"id":"`)
	return body[i : i+strings.IndexByte(body[i:], '"')]
}

func (rs *reviewSite) scrape() string {
	rs.t.Helper()
	return scrape(rs.t, rs.tel)
}

func TestReviewResolvedCounter(t *testing.T) {
	rs := newReviewSite(t)
	resolved := func(status, by string) float64 {
		return metricValue(t, rs.scrape(), telemetry.MetricReviewsResolved, "route", "classify", "status", status, "by", by)
	}
	pending := func() float64 {
		return metricValue(t, rs.scrape(), telemetry.MetricReviewsPending, "route", "classify")
	}
	ids := []string{rs.needsReview(), rs.needsReview(), rs.needsReview(), rs.needsReview()}
	if p := pending(); p != 4 {
		t.Fatalf("pending %v, want 4", p)
	}
	for _, c := range [][2]string{{"approved", "reviewer"}, {"rejected", "reviewer"}, {"approved", "rerun"}} {
		if v := resolved(c[0], c[1]); v != 0 {
			t.Fatalf("%v before any resolution: %v", c, v)
		}
	}

	// approve: +1 approved/reviewer, and only that series.
	if s, b := rs.post("/admin/reviews/"+ids[0]+"/approve", `{"output":{"intent":"other"},"reviewer":"ann"}`); s != 200 {
		t.Fatalf("approve %d %s", s, b)
	}
	if v := resolved("approved", "reviewer"); v != 1 {
		t.Fatalf("approved/reviewer %v", v)
	}
	// A refused approve (the contract rejects the output) and a second
	// resolution of a resolved item count nothing.
	if s, _ := rs.post("/admin/reviews/"+ids[1]+"/approve", `{"output":{"intent":"nonsense"},"reviewer":"ann"}`); s != 422 {
		t.Fatalf("invalid approve %d", s)
	}
	if s, _ := rs.post("/admin/reviews/"+ids[0]+"/reject", `{"reviewer":"ann"}`); s != 409 {
		t.Fatalf("second resolution %d", s)
	}
	if v := resolved("approved", "reviewer"); v != 1 || resolved("rejected", "reviewer") != 0 {
		t.Fatalf("counted a refused resolution: approved %v", v)
	}

	// reject: +1 rejected/reviewer.
	if s, b := rs.post("/admin/reviews/"+ids[1]+"/reject", `{"reviewer":"ann","note":"spam"}`); s != 200 {
		t.Fatalf("reject %d %s", s, b)
	}
	if v := resolved("rejected", "reviewer"); v != 1 {
		t.Fatalf("rejected/reviewer %v", v)
	}

	// A rerun that still fails resolves nothing; one that passes is
	// approved/rerun.
	if s, b := rs.post("/admin/reviews/"+ids[2]+"/rerun", ``); s != 200 || !strings.Contains(b, `"status":"pending"`) {
		t.Fatalf("failing rerun %d %s", s, b)
	}
	if v := resolved("approved", "rerun"); v != 0 {
		t.Fatalf("approved/rerun %v after a failing rerun", v)
	}
	rs.valid.Store(true)
	if s, b := rs.post("/admin/reviews/"+ids[2]+"/rerun", ``); s != 200 || !strings.Contains(b, `"status":"approved"`) {
		t.Fatalf("rerun %d %s", s, b)
	}
	if v := resolved("approved", "rerun"); v != 1 {
		t.Fatalf("approved/rerun %v", v)
	}
	if v := resolved("approved", "reviewer"); v != 1 {
		t.Fatalf("approved/reviewer moved to %v", v)
	}
	if p := pending(); p != 1 {
		t.Fatalf("pending %v, want 1", p)
	}
	// The last pending item resolved: the gauge is back at 0, its series
	// still there (not gone, which a graph or alert reads as no data).
	if s, b := rs.post("/admin/reviews/"+ids[3]+"/reject", `{"reviewer":"ann"}`); s != 200 {
		t.Fatalf("reject %d %s", s, b)
	}
	m := parseSamples(t, rs.scrape())
	if p := m.get(t, telemetry.MetricReviewsPending, "route", "classify"); p != 0 {
		t.Fatalf("pending %v after the last resolution, want 0", p)
	}
}

func TestWebhookDeliveriesCounter(t *testing.T) {
	rs := newReviewSite(t)
	deliveries := func(result string) float64 {
		return metricValue(t, rs.scrape(), telemetry.MetricWebhookDeliveries, "result", result)
	}
	var mu sync.Mutex
	tries := map[string]int{}
	var down atomic.Bool // the receiver answers 500 to everything
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		tries[r.Header.Get("X-Contractd-Delivery")]++
		n := tries[r.Header.Get("X-Contractd-Delivery")]
		mu.Unlock()
		if down.Load() || n == 1 { // every delivery's first try fails
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	outbox := func() int {
		ds, err := rs.store.ClaimDeliveries(context.Background(), time.Now().Add(48*time.Hour), 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(ds)
	}
	run := func(wh *proxy.Webhook, until func() bool) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { rs.q.RunWebhook(ctx, wh); close(done) }()
		deadline := time.Now().Add(10 * time.Second)
		for !until() {
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("webhook: success %v failure %v expired %v", deliveries("success"), deliveries("failure"), deliveries("expired"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		wh.Client.CloseIdleConnections()
	}

	// Two items, one resolved: three deliveries (2 created, 1 resolved),
	// each failing once and then delivered.
	id := rs.needsReview()
	rs.needsReview()
	if s, b := rs.post("/admin/reviews/"+id+"/reject", `{"reviewer":"ann"}`); s != 200 {
		t.Fatalf("reject %d %s", s, b)
	}
	if v := deliveries("success") + deliveries("failure") + deliveries("expired"); v != 0 {
		t.Fatalf("%v deliveries counted before the worker ran", v)
	}
	wh := &proxy.Webhook{URL: hook.URL, Secret: []byte("hook-secret"), Backoff: time.Millisecond, Client: &http.Client{}}
	run(wh, func() bool { return deliveries("success") == 3 })
	if f := deliveries("failure"); f != 3 {
		t.Fatalf("failure %v, want 3 (one per delivery)", f)
	}
	if e := deliveries("expired"); e != 0 {
		t.Fatalf("expired %v", e)
	}
	if n := outbox(); n != 0 {
		t.Fatalf("%d deliveries left", n)
	}

	// A receiver that stays down past MaxAge: the delivery is given up
	// (expired), counted once, and leaves the outbox.
	down.Store(true)
	rs.needsReview()
	wh = &proxy.Webhook{URL: hook.URL, Secret: []byte("hook-secret"), Backoff: time.Millisecond, MaxAge: time.Nanosecond, Client: &http.Client{}}
	run(wh, func() bool { return deliveries("expired") == 1 })
	if n := outbox(); n != 0 {
		t.Fatalf("%d deliveries left after expiry", n)
	}
	if s, f := deliveries("success"), deliveries("failure"); s != 3 || f != 3 {
		t.Fatalf("success %v failure %v moved on expiry", s, f)
	}
}

// TestRerunSpendCounted: the upstream calls a review rerun makes spend
// tokens like a request's attempts, so contractd_tokens_total and
// contractd_upstream_duration_seconds count them (the per-request series,
// requests and attempts and violations, count the clients' requests only).
func TestRerunSpendCounted(t *testing.T) {
	rs := newReviewSite(t)
	id := rs.needsReview() // two attempts (classify's plan), 11 + 7 tokens each
	type snap struct{ in, out, calls, reqs, att1 float64 }
	read := func() snap {
		m := rs.scrape()
		return snap{
			in:    metricValue(t, m, telemetry.MetricTokens, "route", "classify", "direction", "input"),
			out:   metricValue(t, m, telemetry.MetricTokens, "route", "classify", "direction", "output"),
			calls: metricValue(t, m, telemetry.MetricUpstreamDuration+"_count", "route", "classify"),
			reqs:  metricValue(t, m, telemetry.MetricRequests, "route", "classify", "outcome", "needs_review"),
			att1:  metricValue(t, m, telemetry.MetricAttempts, "route", "classify", "attempt", "1", "result", "invalid"),
		}
	}
	before := read()
	if before != (snap{2 * upPrompt, 2 * upCompletion, 2, 1, 1}) {
		t.Fatalf("after one needs_review request: %+v", before)
	}
	// A rerun that still fails: two more upstream calls.
	if s, b := rs.post("/admin/reviews/"+id+"/rerun", ``); s != 200 || !strings.Contains(b, `"status":"pending"`) {
		t.Fatalf("rerun %d %s", s, b)
	}
	// One that passes at its first attempt: one more.
	rs.valid.Store(true)
	if s, b := rs.post("/admin/reviews/"+id+"/rerun", ``); s != 200 || !strings.Contains(b, `"status":"approved"`) {
		t.Fatalf("rerun %d %s", s, b)
	}
	if got, want := read(), (snap{5 * upPrompt, 5 * upCompletion, 5, 1, 1}); got != want {
		t.Fatalf("after two reruns (3 upstream calls): %+v, want %+v", got, want)
	}
}
