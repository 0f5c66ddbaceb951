package telemetry_test

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/telemetry"
)

// scrapeAdmin GETs /metrics from the admin endpoint (what admin_listen
// serves) over HTTP.
func scrapeAdmin(t *testing.T, tel *telemetry.Telemetry) string {
	t.Helper()
	admin := &proxy.Admin{Metrics: tel.MetricsHandler()}
	srv := httptest.NewServer(admin)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics Content-Type %q", ct)
	}
	return string(b)
}

// TestMetricsScrape drives every scripted request and asserts, by scraping
// /metrics, the exact value of every series.
func TestMetricsScrape(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	before := parseSamples(t, scrapeAdmin(t, h.tel))
	// Reload series exist before the first reload; request series do not.
	if got := before.get(t, telemetry.MetricConfigReloads, "result", "success"); got != 0 {
		t.Fatalf("reloads success before any reload = %v", got)
	}
	if got := before.get(t, telemetry.MetricConfigReloads, "result", "failure"); got != 0 {
		t.Fatalf("reloads failure before any reload = %v", got)
	}
	if s := before.series(telemetry.MetricRequests); len(s) != 0 {
		t.Fatalf("request series before any request: %v", s)
	}

	res := runScenarios(t, h)
	h.tel.ConfigReload(true)
	h.tel.ConfigReload(true)
	h.tel.ConfigReload(false)
	h.waitSpans(len(res)) // every handler has returned: HTTP metrics are recorded
	text := scrapeAdmin(t, h.tel)
	m := parseSamples(t, text)

	type want struct {
		labels []string
		v      float64
	}
	check := func(name string, wants []want) {
		t.Helper()
		var keys []string
		for _, w := range wants {
			if got := m.get(t, name, w.labels...); got != w.v {
				t.Errorf("%s%v = %v, want %v", name, w.labels, got, w.v)
			}
			labels := map[string]string{}
			for i := 0; i < len(w.labels); i += 2 {
				labels[w.labels[i]] = w.labels[i+1]
			}
			keys = append(keys, seriesKey(name, labels))
		}
		sort.Strings(keys)
		if got := m.series(name); strings.Join(got, "\n") != strings.Join(keys, "\n") {
			t.Errorf("%s series:\n%s\nwant exactly:\n%s", name, strings.Join(got, "\n"), strings.Join(keys, "\n"))
		}
	}
	// Every request counts once, and is timed once, under its route and outcome.
	perRequest := []want{
		{[]string{"route", "classify", "outcome", "valid"}, 3},
		{[]string{"route", "classify", "outcome", "needs_review"}, 1},
		{[]string{"route", "classify", "outcome", "upstream_error"}, 1},
		{[]string{"route", "classify", "outcome", "rejected"}, 1},
		{[]string{"route", "classify-tight", "outcome", "needs_review"}, 1},
		{[]string{"route", "raw", "outcome", "passthrough"}, 1},
		// 401 (before the route is read) and 404 (not a route): no route label value.
		{[]string{"route", "", "outcome", "rejected"}, 2},
	}
	check("contractd_requests_total", perRequest)
	check("contractd_attempts_total", []want{
		{[]string{"route", "classify", "attempt", "1", "result", "valid"}, 2},
		{[]string{"route", "classify", "attempt", "1", "result", "invalid"}, 2},
		{[]string{"route", "classify", "attempt", "1", "result", "upstream_error"}, 1},
		{[]string{"route", "classify", "attempt", "2", "result", "valid"}, 1},
		{[]string{"route", "classify", "attempt", "2", "result", "invalid"}, 1},
		{[]string{"route", "classify-tight", "attempt", "1", "result", "invalid"}, 1},
	})
	check("contractd_violations_total", []want{
		{[]string{"route", "classify", "kind", "parse", "rule", "not_json"}, 1},
		{[]string{"route", "classify", "kind", "policy", "rule", "label"}, 1},
		{[]string{"route", "classify", "kind", "schema", "rule", "additionalProperties"}, 1},
		{[]string{"route", "classify-tight", "kind", "policy", "rule", "label"}, 1},
	})
	// Six attempts with usage on classify (valid, valid_path, retry ×2,
	// review ×2); the 502 attempt reported none.
	check("contractd_tokens_total", []want{
		{[]string{"route", "classify", "direction", "input"}, 6 * upPrompt},
		{[]string{"route", "classify", "direction", "output"}, 6 * upCompletion},
		{[]string{"route", "classify-tight", "direction", "input"}, bigPrompt},
		{[]string{"route", "classify-tight", "direction", "output"}, bigCompletion},
	})
	check("contractd_config_reloads_total", []want{
		{[]string{"result", "success"}, 2},
		{[]string{"result", "failure"}, 1},
	})
	check("contractd_request_duration_seconds_count", perRequest)
	// One observation per upstream call: 7 on classify (the 502 included),
	// 1 on classify-tight, 1 for the passthrough.
	check("contractd_upstream_duration_seconds_count", []want{
		{[]string{"route", "classify"}, 7},
		{[]string{"route", "classify-tight"}, 1},
		{[]string{"route", "raw"}, 1},
	})
	check("contractd_validation_duration_seconds_count", []want{
		{[]string{"route", "classify"}, 6},
		{[]string{"route", "classify-tight"}, 1},
	})

	// Durations are the audit's: the histogram sums equal the audited
	// duration_ms and latency_ms.
	reqSum := map[[2]string]float64{}
	upSum := map[string]float64{}
	for _, ev := range h.events() {
		route := ev["route"].(string)
		if ev["error_code"] == "model_not_found" {
			route = ""
		}
		reqSum[[2]string{route, ev["outcome"].(string)}] += ev["duration_ms"].(float64) / 1000
		for _, a := range ev["attempts"].([]any) {
			upSum[route] += a.(map[string]any)["latency_ms"].(float64) / 1000
		}
	}
	for k, v := range reqSum {
		if got := m.get(t, "contractd_request_duration_seconds_sum", "route", k[0], "outcome", k[1]); math.Abs(got-v) > 1e-9 {
			t.Errorf("request duration sum %v = %v, audit says %v", k, got, v)
		}
	}
	for k, v := range upSum {
		if got := m.get(t, "contractd_upstream_duration_seconds_sum", "route", k); math.Abs(got-v) > 1e-9 {
			t.Errorf("upstream duration sum %s = %v, audit says %v", k, got, v)
		}
	}

	// Histogram buckets: 10 µs (validation) to 5 min (slow LLM calls).
	for _, le := range []string{"1e-05", "0.0001", "0.001", "0.1", "1", "60", "300", "+Inf"} {
		for _, name := range []string{"contractd_request_duration_seconds_bucket", "contractd_upstream_duration_seconds_bucket",
			"contractd_validation_duration_seconds_bucket", "http_server_request_duration_seconds_bucket"} {
			if !strings.Contains(text, name+"{") || !strings.Contains(text, `le="`+le+`"`) {
				t.Errorf("%s has no le=%q bucket", name, le)
			}
		}
	}
	if got := m.get(t, "contractd_request_duration_seconds_bucket", "route", "classify", "outcome", "valid", "le", "+Inf"); got != 3 {
		t.Errorf("+Inf bucket = %v, want 3", got)
	}

	// HTTP server metrics (otelhttp), bounded labels: method, status, the
	// mux pattern as http.route, scheme.
	httpCount := func(status, route string) float64 {
		t.Helper()
		return m.get(t, "http_server_request_duration_seconds_count",
			"http_request_method", "POST", "http_response_status_code", status, "http_route", route, "url_scheme", "http")
	}
	for _, c := range []struct {
		status, route string
		n             float64
	}{
		{"200", "/v1/chat/completions", 3}, {"200", "/r/{route}/v1/chat/completions", 1},
		{"422", "/v1/chat/completions", 2}, {"502", "/v1/chat/completions", 1},
		{"400", "/v1/chat/completions", 1}, {"401", "/v1/chat/completions", 1}, {"404", "/v1/chat/completions", 1},
	} {
		if got := httpCount(c.status, c.route); got != c.n {
			t.Errorf("http_server_request_duration_seconds_count{%s %s} = %v, want %v", c.status, c.route, got, c.n)
		}
	}
	for _, name := range []string{"http_server_request_body_size_bytes_count", "http_server_response_body_size_bytes_count"} {
		if len(m.series(name)) != 0 {
			t.Errorf("%s is exported; the body-size histograms are dropped", name)
		}
	}
	for k := range m {
		if strings.HasPrefix(k, "http_server_") && (strings.Contains(k, "server_address") || strings.Contains(k, "server_port") ||
			strings.Contains(k, "client_address") || strings.Contains(k, "user_agent")) {
			t.Errorf("unbounded HTTP metric label: %s", k)
		}
	}
}

// TestMetricNames checks the exposed families: the names exactly
// (no doubled _total, no unit suffix added twice), their types and label
// names, and no OTel scope or target_info noise.
func TestMetricNames(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	runScenarios(t, h)
	text := scrapeAdmin(t, h.tel)

	types := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		}
	}
	spec := map[string]struct {
		typ    string
		labels []string
	}{
		"contractd_requests_total":            {"counter", []string{"outcome", "route"}},
		"contractd_attempts_total":            {"counter", []string{"attempt", "result", "route"}},
		"contractd_violations_total":          {"counter", []string{"kind", "route", "rule"}},
		"contractd_request_duration_seconds":  {"histogram", []string{"outcome", "route"}},
		"contractd_upstream_duration_seconds": {"histogram", []string{"route"}},
		"contractd_tokens_total":              {"counter", []string{"direction", "route"}},
		"contractd_config_reloads_total":      {"counter", []string{"result"}},
		// Beyond the required series: validation time.
		"contractd_validation_duration_seconds": {"histogram", []string{"route"}},
	}
	for name, s := range spec {
		if types[name] != s.typ {
			t.Errorf("# TYPE %s = %q, want %q", name, types[name], s.typ)
		}
	}
	for name := range types {
		if strings.HasPrefix(name, "contractd_") {
			if _, ok := spec[name]; !ok {
				t.Errorf("unexpected metric family %s", name)
			}
		}
		if strings.Contains(name, "_total_total") || strings.Contains(name, "_seconds_seconds") {
			t.Errorf("doubled suffix: %s", name)
		}
	}
	for _, want := range []string{"http_server_request_duration_seconds"} {
		if types[want] != "histogram" {
			t.Errorf("HTTP server metric %s missing (type %q)", want, types[want])
		}
	}
	// Label names of every contractd sample are exactly those docs/observability.md lists.
	labelRe := regexp.MustCompile(`([a-z_]+)="`)
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "contractd_") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		var got []string
		for _, mm := range labelRe.FindAllStringSubmatch(line, -1) {
			if mm[1] != "le" {
				got = append(got, mm[1])
			}
		}
		sort.Strings(got)
		if want := spec[base].labels; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s labels %v, want %v", line, got, want)
		}
	}
	for _, bad := range []string{"otel_scope_", "target_info"} {
		if strings.Contains(text, bad) {
			t.Errorf("exposition contains %s", bad)
		}
	}
}

// TestRouteLabel: requests that never resolved to a configured route are
// counted under route="", so clients cannot mint series.
func TestRouteLabel(t *testing.T) {
	for _, c := range []struct {
		ev   audit.Event
		want string
	}{
		{audit.Event{Route: "classify", ErrorCode: "input_schema_violation"}, "classify"},
		{audit.Event{Route: "made-up-by-a-client", ErrorCode: "model_not_found"}, ""},
		{audit.Event{ErrorCode: "invalid_api_key"}, ""},
	} {
		if got := telemetry.RouteLabel(&c.ev); got != c.want {
			t.Errorf("RouteLabel(%+v) = %q, want %q", c.ev, got, c.want)
		}
	}
}

func TestAttemptResult(t *testing.T) {
	ev := &audit.Event{Outcome: audit.OutcomeUpstreamError, Attempts: []audit.Attempt{
		{Attempt: 1, Answered: true, Violations: nil},
		{Attempt: 2, Answered: true, Violations: make([]contracts.Violation, 1)},
		{Attempt: 3},
	}}
	for i, want := range []telemetry.Result{telemetry.ResultValid, telemetry.ResultInvalid, telemetry.ResultUpstreamError} {
		if got := telemetry.AttemptResult(ev, i); got != want {
			t.Errorf("attempt %d: %s, want %s", i+1, got, want)
		}
	}
}
