package telemetry_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
)

// Telemetry overhead benchmarks (docs/observability.md, "What telemetry
// costs"). Every proxy benchmark sends the same valid contract request
// through the in-process handler (httptest.ResponseRecorder, no client
// socket) to a fast fake upstream on loopback; audit and logs go to
// io.Discard on every side, so only telemetry differs.
//
//	BenchmarkUpstreamBaseline         the bare upstream call the proxy makes (same body, same client)
//	BenchmarkProxyTelemetryOff        proxy, no telemetry at all
//	BenchmarkProxyTelemetryOn         proxy with telemetry as `contractd serve` runs it without
//	                                  OTEL_EXPORTER_OTLP_*: every metric, HTTP server metric,
//	                                  W3C propagation; spans not recorded
//	BenchmarkProxyTelemetryOnTraced   plus every request traced (otelhttp server span, attempt and
//	                                  validate spans) and batch-exported to a discarding exporter
//	BenchmarkProxyTelemetryOnSampled  traced with OTEL_TRACES_SAMPLER=parentbased_traceidratio, 0.1
//
// overhead = (On − Off) / (Off − Baseline): the share of the proxy's own
// added latency that instrumentation costs. BenchmarkTelemetryOverhead
// interleaves all five and reports the medians and overheads directly.

// variant is one benchmark configuration.
type variant struct {
	name string
	opts harnessOpts
	env  map[string]string // set before telemetry.New reads it
}

var variants = []variant{
	{name: "off", opts: harnessOpts{telemetryOff: true}},
	{name: "on", opts: harnessOpts{envExporter: true}},
	{name: "traced", opts: harnessOpts{batch: true, exporter: tracetest.NewNoopExporter()}},
	{name: "sampled", opts: harnessOpts{batch: true, exporter: tracetest.NewNoopExporter()},
		env: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}},
}

// newBenchHarness builds a variant's harness; no OTLP endpoint is ever set.
func newBenchHarness(b *testing.B, v variant) *harness {
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	b.Setenv("OTEL_TRACES_SAMPLER", "")
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", "")
	for k, val := range v.env {
		b.Setenv(k, val)
	}
	o := v.opts
	o.discard = true
	h := newHarness(b, o)
	h.up.SetQuiet(true)
	for k := range v.env {
		b.Setenv(k, "")
	}
	return h
}

var benchBody = []byte(rawContractBody("classify", scenarioInput("valid")))

// serveOne sends the benchmark request through the in-process handler.
func serveOne(b *testing.B, h http.Handler) {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(benchBody))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
}

func benchVariant(b *testing.B, name string) {
	for _, v := range variants {
		if v.name == name {
			h := newBenchHarness(b, v)
			b.ReportAllocs()
			defer testkit.CPUPerOp(b)()
			for b.Loop() {
				serveOne(b, h.handler)
			}
			return
		}
	}
	b.Fatalf("no variant %s", name)
}

func BenchmarkProxyTelemetryOff(b *testing.B)       { benchVariant(b, "off") }
func BenchmarkProxyTelemetryOn(b *testing.B)        { benchVariant(b, "on") }
func BenchmarkProxyTelemetryOnTraced(b *testing.B)  { benchVariant(b, "traced") }
func BenchmarkProxyTelemetryOnSampled(b *testing.B) { benchVariant(b, "sampled") }

// upstreamCall is the bare call to the fake upstream that the proxy makes
// for the benchmark request: the same body (attempt 1), a Caller like the
// proxy's.
func upstreamCall(b *testing.B) func() {
	h := newBenchHarness(b, variants[0])
	route := h.rt.Routes["classify"]
	body, err := proxy.Render(route, benchBody, 1)
	if err != nil {
		b.Fatal(err)
	}
	caller := proxy.NewCaller(func(*config.Upstream) string { return upstreamKey })
	return func() {
		comp, err := caller.Call(context.Background(), route.Upstream, body, nil)
		if err != nil || comp.Output == "" {
			b.Fatalf("call: %v", err)
		}
	}
}

func BenchmarkUpstreamBaseline(b *testing.B) {
	call := upstreamCall(b)
	b.ReportAllocs()
	defer testkit.CPUPerOp(b)()
	for b.Loop() {
		call()
	}
}

// BenchmarkTelemetryOverhead runs the baseline and every variant in
// interleaved rounds of 50 requests each (the order rotating every round),
// so that drift in the load of a shared machine hits them alike, and
// reports the medians of the per-round wall and CPU times per request and
// each variant's overhead computed from those medians.
func BenchmarkTelemetryOverhead(b *testing.B) {
	kinds := []func(){upstreamCall(b)}
	names := []string{"base"}
	for _, v := range variants {
		h := newBenchHarness(b, v)
		kinds = append(kinds, func() { serveOne(b, h.handler) })
		names = append(names, v.name)
	}
	const perRound = 50
	wall := make([][]float64, len(kinds))
	cpu := make([][]float64, len(kinds))
	b.ResetTimer()
	for round := 0; b.Loop(); round++ {
		for i := range kinds {
			k := (i + round) % len(kinds)
			w0, c0 := time.Now(), testkit.ProcessCPU()
			for range perRound {
				kinds[k]()
			}
			wall[k] = append(wall[k], float64(time.Since(w0).Nanoseconds())/perRound)
			cpu[k] = append(cpu[k], float64(testkit.ProcessCPU()-c0)/perRound)
		}
	}
	b.StopTimer()
	for _, m := range []struct {
		unit string
		v    [][]float64
	}{{"wall", wall}, {"cpu", cpu}} {
		base, off := median(m.v[0]), median(m.v[1])
		b.ReportMetric(base, "base-"+m.unit+"-ns")
		b.ReportMetric(off, "off-"+m.unit+"-ns")
		for i := 2; i < len(names); i++ {
			on := median(m.v[i])
			b.ReportMetric(on, fmt.Sprintf("%s-%s-ns", names[i], m.unit))
			b.ReportMetric(100*(on-off)/(off-base), fmt.Sprintf("%s-overhead-%%-%s", names[i], m.unit))
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
