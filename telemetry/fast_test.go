package telemetry

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
)

// sdkReference records the per-request metrics as contractd did through
// the OpenTelemetry SDK before fast.go: the same instruments (name,
// description, unit, buckets), attribute sets and exporter.
type sdkReference struct {
	counters map[string]metric.Int64Counter
	hists    map[string]metric.Float64Histogram
}

func newSDKReference(t *testing.T, reg *prometheus.Registry) *sdkReference {
	mp, err := meterProvider(reg, resource.Empty())
	if err != nil {
		t.Fatal(err)
	}
	m := mp.Meter(ScopeName)
	r := &sdkReference{counters: map[string]metric.Int64Counter{}, hists: map[string]metric.Float64Histogram{}}
	for _, d := range perRequestMetrics {
		if d.hist {
			h, err := m.Float64Histogram(d.name, metric.WithDescription(d.help), metric.WithUnit(d.unit), metric.WithExplicitBucketBoundaries(Buckets...))
			if err != nil {
				t.Fatal(err)
			}
			r.hists[d.name] = h
			continue
		}
		c, err := m.Int64Counter(d.name, metric.WithDescription(d.help), metric.WithUnit(d.unit))
		if err != nil {
			t.Fatal(err)
		}
		r.counters[d.name] = c
	}
	return r
}

func (r *sdkReference) add(name string, v int64, kv ...attribute.KeyValue) {
	r.counters[name].Add(context.Background(), v, metric.WithAttributeSet(attribute.NewSet(kv...)))
}

func (r *sdkReference) record(name string, v float64, kv ...attribute.KeyValue) {
	r.hists[name].Record(context.Background(), v, metric.WithAttributeSet(attribute.NewSet(kv...)))
}

// requestDone is RequestDone as it was.
func (r *sdkReference) requestDone(ev *audit.Event) {
	route := attribute.String("route", RouteLabel(ev))
	outcome := attribute.String("outcome", string(ev.Outcome))
	r.add(MetricRequests, 1, route, outcome)
	r.record(MetricRequestDuration, ev.DurationMS/1000, route, outcome)
	for i, a := range ev.Attempts {
		r.record(MetricUpstreamDuration, a.LatencyMS/1000, route)
		if ev.Contract == nil {
			continue
		}
		r.add(MetricAttempts, 1, route, attribute.String("attempt", strconv.Itoa(a.Attempt)), attribute.String("result", string(AttemptResult(ev, i))))
		for _, v := range a.Violations {
			r.add(MetricViolations, 1, route, attribute.String("kind", v.Kind), attribute.String("rule", v.Rule))
		}
	}
	if ev.Contract != nil && len(ev.Attempts) > 0 {
		r.add(MetricTokens, int64(ev.Usage.PromptTokens), route, attribute.String("direction", "input"))
		r.add(MetricTokens, int64(ev.Usage.CompletionTokens), route, attribute.String("direction", "output"))
	}
}

// httpRecord is the HTTP server metric's Record as it was.
func (r *sdkReference) httpRecord(k httpLabels, v float64) {
	scheme := "http"
	if k.tls {
		scheme = "https"
	}
	kv := []attribute.KeyValue{
		attribute.String("http.request.method", k.method),
		attribute.Int("http.response.status_code", k.status),
		attribute.String("url.scheme", scheme),
	}
	if k.route != "" {
		kv = append(kv, attribute.String("http.route", k.route))
	}
	r.record(MetricHTTPDuration, v, kv...)
}

// exposition is reg's text exposition of the per-request metrics.
func exposition(t *testing.T, reg *prometheus.Registry) []byte {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if slices.ContainsFunc(perRequestMetrics, func(d perRequestMetric) bool { return d.exposed == mf.GetName() }) {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.Bytes()
}

// TestPerRequestMetricsMatchSDK: the per-request metrics expose exactly
// what the OpenTelemetry SDK's Prometheus exporter did for the same
// requests: names, help, labels, buckets (a value on a bound counts in
// it), sums, a negative token count, label sets past the SDK's cap summed
// under otel_metric_overflow, and a request that matched no pattern
// without http_route.
func TestPerRequestMetricsMatchSDK(t *testing.T) {
	regSDK, regOurs := prometheus.NewRegistry(), prometheus.NewRegistry()
	ref := newSDKReference(t, regSDK)
	tel, err := New(Options{Registry: regOurs})
	if err != nil {
		t.Fatal(err)
	}
	contract := &audit.Ref{Name: "c"}
	viol := []contracts.Violation{{Kind: "schema", Rule: "required"}, {Kind: "policy", Rule: "label"}}
	events := []*audit.Event{
		{Route: "hop", Outcome: audit.OutcomePassthrough, DurationMS: 0.3, Attempts: []audit.Attempt{{Attempt: 1, Answered: true, LatencyMS: 0.25}}},
		{Route: "hop", Outcome: audit.OutcomePassthrough, DurationMS: 1, Attempts: []audit.Attempt{{Attempt: 1, Answered: true, LatencyMS: 1}}},
		{Route: "c", Outcome: audit.OutcomeValid, DurationMS: 12.5, Contract: contract, Usage: audit.Usage{PromptTokens: 120, CompletionTokens: 40},
			Attempts: []audit.Attempt{{Attempt: 1, Answered: true, LatencyMS: 5, Violations: viol}, {Attempt: 2, Answered: true, LatencyMS: 7}}},
		{Route: "c", Outcome: audit.OutcomeUpstreamError, DurationMS: 400000, Contract: contract, Usage: audit.Usage{PromptTokens: -3},
			Attempts: []audit.Attempt{{Attempt: 1, LatencyMS: 300000}}},
		{Route: "nope", ErrorCode: "model_not_found", Outcome: audit.OutcomeRejected, DurationMS: 0.001},
		{Route: "c", Outcome: audit.OutcomeNeedsReview, DurationMS: 0, Contract: contract, Attempts: []audit.Attempt{{Attempt: 1, Answered: true, Violations: viol[:1]}}},
	}
	for i := range seriesLimit + 20 {
		events = append(events, &audit.Event{Route: "r" + strconv.Itoa(i), Outcome: audit.OutcomeValid, DurationMS: float64(i)})
	}
	for _, ev := range events {
		tel.RequestDone(context.Background(), ev)
		ref.requestDone(ev)
	}
	for i, k := range []httpLabels{
		{method: "POST", status: 200, route: "/v1/chat/completions"},
		{method: "POST", status: 422, route: "/r/{route}/v1/chat/completions", tls: true},
		{method: "_OTHER", status: 404, route: ""},
		{method: "POST", status: 200, route: "/v1/chat/completions"},
	} {
		v := []float64{0.00001, 0.0007, math.Inf(1), 2}[i]
		tel.httpSets.get(k).observe(tel.httpDur, v)
		ref.httpRecord(k, v)
	}
	for _, v := range []float64{0.00002, 0.3} {
		tel.routes.get("c").validation.observe(tel.valDur, v)
		ref.record(MetricValidationDuration, v, attribute.String("route", "c"))
	}

	want, got := exposition(t, regSDK), exposition(t, regOurs)
	if len(want) == 0 || !bytes.Contains(want, []byte(`otel_metric_overflow="true"`)) {
		t.Fatalf("the reference exposed no overflow series:\n%.2000s", want)
	}
	if !bytes.Equal(got, want) {
		wl, gl := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
		for i := range min(len(wl), len(gl)) {
			if !bytes.Equal(wl[i], gl[i]) {
				t.Fatalf("exposition differs at line %d:\nSDK:  %s\nours: %s", i+1, wl[i], gl[i])
			}
		}
		t.Fatalf("exposition differs in length: SDK %d lines, ours %d", len(wl), len(gl))
	}
}
