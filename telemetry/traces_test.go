package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/contractd/contractd/telemetry"
)

var traceparentRe = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// upstreamCallsByParent indexes the fake upstream's calls by the parent
// span id of their traceparent, checking the header's format.
func upstreamCallsByParent(t *testing.T, calls []upCall) map[string]upCall {
	t.Helper()
	out := map[string]upCall{}
	for _, c := range calls {
		m := traceparentRe.FindStringSubmatch(c.Traceparent)
		if m == nil {
			t.Fatalf("upstream got traceparent %q, not a W3C traceparent", c.Traceparent)
		}
		out[m[1]+"/"+m[2]] = c
	}
	return out
}

// TestSpanTree asserts, for each kind of request, the span tree (server →
// attempt → validate), the attributes, and that the upstream received a
// traceparent naming the attempt span in the server span's trace.
func TestSpanTree(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	res := runScenarios(t, h)
	spans := h.waitSpans(len(res))
	byParent := upstreamCallsByParent(t, h.up.Calls())
	if len(byParent) != len(h.up.Calls()) {
		t.Fatalf("%d upstream calls but %d distinct traceparents", len(h.up.Calls()), len(byParent))
	}

	type attempt struct {
		temp       float64
		violations int64
		rules      []string
		upErr      string // error.type when the call failed
		in, out    int64
	}
	cases := []struct {
		name     string
		route    string
		outcome  string
		status   int64
		code     string
		attempts []attempt
	}{
		{"valid", "classify", "valid", 200, "", []attempt{{temp: 0.7, in: upPrompt, out: upCompletion}}},
		{"valid_path", "classify", "valid", 200, "", []attempt{{temp: 0.7, in: upPrompt, out: upCompletion}}},
		{"retry", "classify", "valid", 200, "", []attempt{
			{temp: 0.7, violations: 1, rules: []string{"parse/not_json"}, in: upPrompt, out: upCompletion},
			{temp: 0, in: upPrompt, out: upCompletion}}},
		{"review", "classify", "needs_review", 422, "contract_violation", []attempt{
			{temp: 0.7, violations: 1, rules: []string{"policy/label"}, in: upPrompt, out: upCompletion},
			{temp: 0, violations: 1, rules: []string{"schema/additionalProperties"}, in: upPrompt, out: upCompletion}}},
		{"fail", "classify", "upstream_error", 502, "upstream_error", []attempt{{temp: 0.7, upErr: "500"}}},
		{"budget", "classify-tight", "needs_review", 422, "budget_exhausted", []attempt{
			{temp: 0.7, violations: 1, rules: []string{"policy/label"}, in: bigPrompt, out: bigCompletion}}},
		{"bad_input", "classify", "rejected", 400, "input_schema_violation", nil},
		{"wrong_key", "", "rejected", 401, "invalid_api_key", nil},
		{"unknown_route", "", "rejected", 404, "model_not_found", nil},
		{"passthrough", "raw", "passthrough", 200, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := serverSpan(t, spans, res[c.name].ID)
			if srv.Parent.IsValid() {
				t.Errorf("server span has a parent %v (no inbound trace context was sent)", srv.Parent)
			}
			if !strings.HasPrefix(srv.Name, "POST /") {
				t.Errorf("server span name %q", srv.Name)
			}
			if got := attr(srv, "http.response.status_code").AsInt64(); got != c.status {
				t.Errorf("http.response.status_code = %d, want %d", got, c.status)
			}
			if got := attr(srv, "contractd.outcome").AsString(); got != c.outcome {
				t.Errorf("contractd.outcome = %q, want %q", got, c.outcome)
			}
			if got := attr(srv, "contractd.route").AsString(); got != c.route {
				t.Errorf("contractd.route = %q, want %q", got, c.route)
			}
			if got := attr(srv, "contractd.error_code").AsString(); got != c.code {
				t.Errorf("contractd.error_code = %q, want %q", got, c.code)
			}
			if got := attr(srv, "contractd.attempts").AsInt64(); got != int64(len(c.attempts)) {
				t.Errorf("contractd.attempts = %d, want %d", got, len(c.attempts))
			}
			if c.status >= 500 {
				if srv.Status.Code != codes.Error {
					t.Errorf("server span status %v, want Error", srv.Status)
				}
			} else if srv.Status.Code == codes.Error {
				t.Errorf("server span status %v for %d", srv.Status, c.status)
			}
			kids := children(spans, srv)
			if len(kids) != len(c.attempts) {
				t.Fatalf("server span has %d children, want %d attempt spans", len(kids), len(c.attempts))
			}
			for i, want := range c.attempts {
				a := kids[i]
				if a.Name != telemetry.SpanAttempt || a.SpanKind != trace.SpanKindClient {
					t.Fatalf("child %d: %q kind %v, want %s client", i, a.Name, a.SpanKind, telemetry.SpanAttempt)
				}
				if got := attr(a, "contractd.attempt").AsInt64(); got != int64(i+1) {
					t.Errorf("attempt %d: contractd.attempt = %d", i+1, got)
				}
				if got := attr(a, "contractd.route").AsString(); got != c.route {
					t.Errorf("attempt %d: contractd.route = %q", i+1, got)
				}
				if got := attr(a, "gen_ai.operation.name").AsString(); got != "chat" {
					t.Errorf("attempt %d: gen_ai.operation.name = %q", i+1, got)
				}
				if got := attr(a, "gen_ai.request.model").AsString(); got != "gpt-test" {
					t.Errorf("attempt %d: gen_ai.request.model = %q", i+1, got)
				}
				if !hasAttr(a, "gen_ai.request.temperature") || attr(a, "gen_ai.request.temperature").AsFloat64() != want.temp {
					t.Errorf("attempt %d: gen_ai.request.temperature = %v, want %v", i+1, attr(a, "gen_ai.request.temperature").Emit(), want.temp)
				}
				// The upstream saw this attempt span as its parent.
				call, ok := byParent[a.SpanContext.TraceID().String()+"/"+a.SpanContext.SpanID().String()]
				if !ok {
					t.Errorf("attempt %d: no upstream call with traceparent naming span %s in trace %s", i+1, a.SpanContext.SpanID(), a.SpanContext.TraceID())
				} else if call.Auth != "Bearer "+upstreamKey {
					t.Errorf("attempt %d: upstream Authorization %q", i+1, call.Auth)
				}
				if a.SpanContext.TraceID() != srv.SpanContext.TraceID() {
					t.Errorf("attempt %d: trace id %s, server span's %s", i+1, a.SpanContext.TraceID(), srv.SpanContext.TraceID())
				}
				validate := children(spans, a)
				if want.upErr != "" {
					if got := attr(a, "error.type").AsString(); got != want.upErr {
						t.Errorf("attempt %d: error.type = %q, want %q", i+1, got, want.upErr)
					}
					if a.Status.Code != codes.Error || strings.Contains(a.Status.Description, upstreamErrMark) {
						t.Errorf("attempt %d: status %+v (want Error, without the upstream's message)", i+1, a.Status)
					}
					for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.response.finish_reasons", "contractd.violations"} {
						if hasAttr(a, k) {
							t.Errorf("attempt %d: failed call has %s", i+1, k)
						}
					}
					if len(validate) != 0 {
						t.Errorf("attempt %d: failed call has %d children, want no validate span", i+1, len(validate))
					}
					continue
				}
				if got := attr(a, "gen_ai.usage.input_tokens").AsInt64(); got != want.in {
					t.Errorf("attempt %d: gen_ai.usage.input_tokens = %d, want %d", i+1, got, want.in)
				}
				if got := attr(a, "gen_ai.usage.output_tokens").AsInt64(); got != want.out {
					t.Errorf("attempt %d: gen_ai.usage.output_tokens = %d, want %d", i+1, got, want.out)
				}
				if got := attr(a, "gen_ai.response.finish_reasons").AsStringSlice(); len(got) != 1 || got[0] != "stop" {
					t.Errorf("attempt %d: gen_ai.response.finish_reasons = %v", i+1, got)
				}
				if got := attr(a, "gen_ai.response.model").AsString(); got != "gpt-test-0613" {
					t.Errorf("attempt %d: gen_ai.response.model = %q", i+1, got)
				}
				if got := attr(a, "contractd.violations").AsInt64(); got != want.violations {
					t.Errorf("attempt %d: contractd.violations = %d, want %d", i+1, got, want.violations)
				}
				if got := attr(a, "contractd.valid").AsBool(); got != (want.violations == 0) {
					t.Errorf("attempt %d: contractd.valid = %v", i+1, got)
				}
				if got := attr(a, "contractd.violation_rules").AsStringSlice(); strings.Join(got, ",") != strings.Join(want.rules, ",") {
					t.Errorf("attempt %d: contractd.violation_rules = %v, want %v", i+1, got, want.rules)
				}
				if a.Status.Code == codes.Error {
					t.Errorf("attempt %d: status Error for an upstream success", i+1)
				}
				if len(validate) != 1 || validate[0].Name != telemetry.SpanValidate {
					t.Fatalf("attempt %d: children %v, want one %s span", i+1, names(validate), telemetry.SpanValidate)
				}
				v := validate[0]
				if got := attr(v, "contractd.violations").AsInt64(); got != want.violations {
					t.Errorf("attempt %d: validate span contractd.violations = %d, want %d", i+1, got, want.violations)
				}
				if v.StartTime.Before(a.StartTime) || v.EndTime.After(a.EndTime) {
					t.Errorf("attempt %d: validate span outside its attempt", i+1)
				}
				if len(children(spans, v)) != 0 {
					t.Errorf("attempt %d: validate span has children", i+1)
				}
			}
		})
	}

	// Passthrough: the relayed request's traceparent names the server span
	// itself (there is no attempt span).
	srv := serverSpan(t, spans, res["passthrough"].ID)
	if _, ok := byParent[srv.SpanContext.TraceID().String()+"/"+srv.SpanContext.SpanID().String()]; !ok {
		t.Errorf("passthrough: no upstream call with traceparent naming the server span %s", srv.SpanContext.SpanID())
	}
	// Nothing else was recorded: one server span per request, 8 attempts
	// (valid 1, valid_path 1, retry 2, review 2, fail 1, budget 1) and 7
	// validations (the failed call has none).
	count := map[string]int{}
	for _, s := range spans {
		count[s.Name]++
	}
	if count[telemetry.SpanAttempt] != 8 || count[telemetry.SpanValidate] != 7 || len(spans) != len(res)+8+7 {
		t.Errorf("span counts %v (total %d), want 8 attempts, 7 validations, %d server spans", count, len(spans), len(res))
	}
}

func names(ss []tracetest.SpanStub) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// TestInboundTraceContext: a client's traceparent makes the server span its
// child, and the upstream sees the same trace. On passthrough routes the
// client's own traceparent header is replaced by one naming contractd's
// server span.
func TestInboundTraceContext(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	hdr := map[string]string{"Traceparent": clientTraceparnt}
	resp, b := h.post("/v1/chat/completions", clientKey, rawContractBody("classify", scenarioInput("retry")), hdr)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	rid := resp.Header.Get("X-Request-Id")
	presp, pb := h.post("/v1/chat/completions", clientKey, passthroughBody, hdr)
	if presp.StatusCode != 200 {
		t.Fatalf("passthrough status %d: %s", presp.StatusCode, pb)
	}
	spans := h.waitSpans(2)
	srv := serverSpan(t, spans, rid)
	if srv.SpanContext.TraceID().String() != clientTraceID || srv.Parent.SpanID().String() != clientParentID || !srv.Parent.IsRemote() {
		t.Fatalf("server span trace %s parent %s (remote %v), want the client's %s/%s",
			srv.SpanContext.TraceID(), srv.Parent.SpanID(), srv.Parent.IsRemote(), clientTraceID, clientParentID)
	}
	attempts := children(spans, srv)
	calls := h.up.Calls()
	if len(attempts) != 2 || len(calls) != 3 {
		t.Fatalf("%d attempt spans, %d upstream calls; want 2 and 3", len(attempts), len(calls))
	}
	for i, c := range calls[:2] {
		want := "00-" + clientTraceID + "-" + attempts[i].SpanContext.SpanID().String() + "-01"
		if c.Traceparent != want {
			t.Errorf("upstream call %d traceparent %q, want %q", i+1, c.Traceparent, want)
		}
	}
	psrv := serverSpan(t, spans, presp.Header.Get("X-Request-Id"))
	if want := "00-" + clientTraceID + "-" + psrv.SpanContext.SpanID().String() + "-01"; calls[2].Traceparent != want {
		t.Errorf("passthrough upstream traceparent %q, want %q (contractd's server span, not the client's %s)", calls[2].Traceparent, want, clientParentID)
	}
}

// TestNoExporterStillPropagates: with no span destination (no OTLP
// variables) nothing is recorded, but the client's trace context still
// reaches the upstream, and requests without one send none.
func TestNoExporterStillPropagates(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	h := newHarness(t, harnessOpts{envExporter: true})
	if got := h.tel.Exporter(); got != "none" {
		t.Fatalf("Exporter() = %q, want none", got)
	}
	resp, b := h.post("/v1/chat/completions", clientKey, rawContractBody("classify", scenarioInput("valid")), map[string]string{"Traceparent": clientTraceparnt})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	h.post("/v1/chat/completions", clientKey, rawContractBody("classify", scenarioInput("valid")), nil)
	h.post("/r/raw/v1/chat/completions", clientKey, passthroughBody, map[string]string{"Traceparent": clientTraceparnt})
	calls := h.up.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d upstream calls", len(calls))
	}
	if calls[0].Traceparent != clientTraceparnt {
		t.Errorf("upstream traceparent %q, want the client's %q", calls[0].Traceparent, clientTraceparnt)
	}
	if calls[1].Traceparent != "" {
		t.Errorf("upstream traceparent %q without an inbound one and without recording", calls[1].Traceparent)
	}
	if calls[2].Traceparent != clientTraceparnt {
		t.Errorf("passthrough upstream traceparent %q, want the client's %q", calls[2].Traceparent, clientTraceparnt)
	}
	// Metrics, HTTP server metrics included, work without traces.
	m := parseSamples(t, h.scrape())
	if got := m.get(t, "contractd_requests_total", "route", "classify", "outcome", "valid"); got != 2 {
		t.Errorf("requests_total = %v, want 2", got)
	}
	if got := m.get(t, "contractd_requests_total", "route", "raw", "outcome", "passthrough"); got != 1 {
		t.Errorf("passthrough requests_total = %v, want 1", got)
	}
	if got := m.get(t, "http_server_request_duration_seconds_count", "http_request_method", "POST", "http_response_status_code", "200",
		"http_route", "/v1/chat/completions", "url_scheme", "http"); got != 2 {
		t.Errorf("http_server_request_duration_seconds_count = %v, want 2", got)
	}
	if got := m.get(t, "http_server_request_duration_seconds_count", "http_request_method", "POST", "http_response_status_code", "200",
		"http_route", "/r/{route}/v1/chat/completions", "url_scheme", "http"); got != 1 {
		t.Errorf("passthrough http_server_request_duration_seconds_count = %v, want 1", got)
	}
}

// TestOTLPExport: the standard OTEL_EXPORTER_OTLP_ENDPOINT sends spans over
// OTLP/HTTP (protobuf) to /v1/traces; the payload holds contractd's spans
// and no key.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	var paths, types []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, paths, types = append(bodies, b), append(paths, r.URL.Path), append(types, r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "contractd-otlp-test")

	h := newHarness(t, harnessOpts{envExporter: true})
	if got := h.tel.Exporter(); got != "otlp" {
		t.Fatalf("Exporter() = %q, want otlp", got)
	}
	resp, b := h.post("/v1/chat/completions", clientKey, rawContractBody("classify", scenarioInput("retry")), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	h.post("/v1/chat/completions", wrongKey, rawContractBody("classify", scenarioInput("retry")), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.tel.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) == 0 {
		t.Fatal("the collector received nothing")
	}
	all := bytes.Join(bodies, nil)
	for i, p := range paths {
		if p != "/v1/traces" || types[i] != "application/x-protobuf" {
			t.Errorf("export %d: %s %s", i, p, types[i])
		}
	}
	for _, want := range []string{telemetry.SpanAttempt, telemetry.SpanValidate, "POST /v1/chat/completions", "gen_ai.request.model", "contractd-otlp-test", resp.Header.Get("X-Request-Id")} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("OTLP payload lacks %q", want)
		}
	}
	for _, secret := range []string{clientKey, wrongKey, upstreamKey} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("OTLP payload contains the key %q", secret)
		}
	}
}

// TestExporterSelection: which OTEL_* settings turn OTLP export on.
func TestExporterSelection(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want telemetry.TraceExporter
	}{
		{map[string]string{}, "none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "otlp"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, "otlp"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, "none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, "none"},
	} {
		tel, err := telemetry.New(telemetry.Options{Getenv: func(k string) string { return c.env[k] }})
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if got := tel.Exporter(); got != c.want {
			t.Errorf("%v: Exporter() = %q, want %q", c.env, got, c.want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = tel.Shutdown(ctx)
		cancel()
	}
}

// TestMiddlewareSkipsProbes: health, readiness and metrics requests make
// no span and no HTTP metric; others do, with the mux pattern as http.route
// and the status the handler wrote (200 when it wrote none).
func TestMiddlewareSkipsProbes(t *testing.T) {
	for _, traced := range []bool{true, false} {
		exp := tracetest.NewInMemoryExporter()
		opts := telemetry.Options{SpanExporter: exp, SyncExport: true}
		if !traced {
			opts = telemetry.Options{Getenv: func(string) string { return "" }}
		}
		tel, err := telemetry.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
		mux.HandleFunc("GET /r/{route}/v1/models", func(w http.ResponseWriter, r *http.Request) {})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
		h := tel.Middleware(mux)
		for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/models", "/r/abc/v1/models"} {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
		}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/v1/models", nil))
		spans := exp.GetSpans()
		if traced {
			if len(spans) != 3 || spans[0].Name != "GET /v1/models" || spans[1].Name != "GET /r/{route}/v1/models" {
				t.Errorf("spans %v, want GET /v1/models, GET /r/{route}/v1/models and the BREW one", names(spans))
			}
		} else if len(spans) != 0 {
			t.Errorf("untraced: spans %v", names(spans))
		}
		m := parseSamples(t, scrape(t, tel))
		want := map[string]float64{
			seriesKey("http_server_request_duration_seconds_count", map[string]string{"http_request_method": "GET",
				"http_response_status_code": "204", "http_route": "/v1/models", "url_scheme": "http"}): 1,
			seriesKey("http_server_request_duration_seconds_count", map[string]string{"http_request_method": "GET",
				"http_response_status_code": "200", "http_route": "/r/{route}/v1/models", "url_scheme": "http"}): 1,
			seriesKey("http_server_request_duration_seconds_count", map[string]string{"http_request_method": "_OTHER",
				"http_response_status_code": "200", "http_route": "/", "url_scheme": "http"}): 1,
		}
		got := map[string]float64{}
		for _, k := range m.series("http_server_request_duration_seconds_count") {
			got[k] = m[k]
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("traced=%v: HTTP server metric series\n%v\nwant\n%v", traced, got, want)
		}
		_ = tel.Shutdown(context.Background())
	}
}

// TestPassthroughStreamsThroughMiddleware: the passthrough SSE relay still
// flushes each event at once behind the telemetry middleware (its status
// recorder and otelhttp's writer wrapper), traced or not: the upstream
// holds its second event until the client has read the first.
func TestPassthroughStreamsThroughMiddleware(t *testing.T) {
	for _, traced := range []bool{true, false} {
		t.Run(map[bool]string{true: "traced", false: "untraced"}[traced], func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			h := newHarness(t, harnessOpts{envExporter: !traced})
			h.up.gate = make(chan struct{})
			req, _ := http.NewRequest(http.MethodPost, h.api.URL+"/v1/chat/completions", strings.NewReader(passthroughBody))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			req.Header.Set("X-Test-Gate", "1")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := h.api.Client().Do(req.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, 512)
			n, err := resp.Body.Read(first)
			if err != nil || !strings.Contains(string(first[:n]), `"raw "`) {
				t.Fatalf("first event: %q %v", first[:n], err)
			}
			close(h.up.gate)
			rest, _ := io.ReadAll(resp.Body)
			if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
				t.Fatalf("rest of the stream: %q", rest)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		})
	}
}

// TestSamplerFromEnv: OTEL_TRACES_SAMPLER applies. With always_off nothing
// is recorded, yet each upstream call still gets a traceparent (unsampled,
// flags 00) naming its own attempt, and metrics are unaffected.
func TestSamplerFromEnv(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	h := newHarness(t, harnessOpts{})
	resp, b := h.post("/v1/chat/completions", clientKey, rawContractBody("classify", scenarioInput("retry")), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if n := len(h.spans.GetSpans()); n != 0 {
		t.Errorf("%d spans recorded with always_off", n)
	}
	calls := h.up.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d upstream calls", len(calls))
	}
	var trace0 string
	for i, c := range calls {
		m := regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-00$`).FindStringSubmatch(c.Traceparent)
		if m == nil {
			t.Fatalf("call %d traceparent %q, want an unsampled W3C traceparent", i+1, c.Traceparent)
		}
		if i == 0 {
			trace0 = m[1]
		} else if m[1] != trace0 || c.Traceparent == calls[0].Traceparent {
			t.Errorf("the two attempts' traceparents %q, %q: want one trace, two parents", calls[0].Traceparent, c.Traceparent)
		}
	}
	m := parseSamples(t, h.scrape())
	if got := m.get(t, "contractd_attempts_total", "route", "classify", "attempt", "2", "result", "valid"); got != 1 {
		t.Errorf("attempts_total{2,valid} = %v", got)
	}
}
