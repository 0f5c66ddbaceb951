// Package telemetry turns contractd's request pipeline into OpenTelemetry
// traces and Prometheus metrics, and correlates logs with traces.
//
// Metrics are derived from the finished audit event (RequestDone), so what
// /metrics counts and what the audit log says cannot disagree. Spans come
// from the pipeline's hooks (StartAttempt, StartValidation) and from the
// HTTP middleware (an otelhttp server span per request). Spans are only
// recorded when they have somewhere to go (OTEL_EXPORTER_OTLP_* or
// Options.SpanExporter); otherwise the middleware only carries the client's
// W3C trace context through to the upstream. Nothing secret and no prompt
// or output content is ever put on a span or a metric label: only names,
// numbers and stable rule identifiers.
//
// docs/observability.md documents every metric, span and attribute, and
// what the instrumentation costs.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/contractd/contractd/proxy"
)

// ScopeName is the instrumentation scope of contractd's own spans and metrics.
const ScopeName = "github.com/contractd/contractd"

// Buckets are the explicit histogram boundaries, in seconds, of every
// duration histogram: from 10 µs (validation, rejected requests) to 5 min
// (slow LLM calls with retries).
var Buckets = []float64{
	0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300,
}

// Options configure New. The zero value is a working production setup:
// metrics on a private registry, traces exported over OTLP/HTTP only when
// the standard OTEL_EXPORTER_OTLP_* variables name an endpoint.
type Options struct {
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
	// sets it; default "contractd".
	ServiceName string
	// ServiceVersion is the resource's service.version.
	ServiceVersion string
	// Logger receives exporter and SDK errors; nil discards them.
	Logger *slog.Logger
	// SpanExporter receives finished spans (tests pass an in-memory
	// exporter). Nil: OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, else spans are not
	// recorded (inbound trace context is still passed on upstream).
	SpanExporter sdktrace.SpanExporter
	// SyncExport hands each span to SpanExporter as it ends instead of in
	// batches (tests).
	SyncExport bool
	// Registry is where the Prometheus collectors register; nil: a new
	// private registry with Go runtime and process collectors.
	Registry *prometheus.Registry
	// Global installs the W3C trace-context propagator (used by the
	// upstream caller) and the tracer provider as OpenTelemetry globals.
	Global bool
	// Getenv reads the OTEL_* variables that decide whether traces go to
	// OTLP at all; nil: os.Getenv. The OTLP exporter itself, the sampler
	// and the resource read the process environment.
	Getenv func(string) string
}

// Telemetry implements proxy.Telemetry and owns the tracer and meter
// providers. Safe for concurrent use.
type Telemetry struct {
	tracer   trace.Tracer
	tp       trace.TracerProvider
	sdkTP    *sdktrace.TracerProvider // nil when spans are not recorded
	mp       *sdkmetric.MeterProvider
	prop     propagation.TextMapPropagator
	registry *prometheus.Registry
	metrics  http.Handler
	logger   *slog.Logger
	exporter TraceExporter

	reloads              metric.Int64Counter
	reloadOK, reloadFail metric.MeasurementOption

	// The per-request metrics (fast.go) and their series by labels.
	requests, attempts, violations, tokens *family
	reqDur, upDur, valDur, httpDur         *family
	routes                                 *setCache[string, routeSeries]
	routeOutcome                           *setCache[routeOutcome, outcomeSeries]
	attemptSets                            *setCache[attemptLabels, series]
	violationSets                          *setCache[violationLabels, series]
	httpSets                               *setCache[httpLabels, series]
}

var (
	_ proxy.Telemetry      = (*Telemetry)(nil)
	_ proxy.RerunTelemetry = (*Telemetry)(nil)
)

// New builds the providers, the Prometheus exporter and the instruments.
func New(opts Options) (*Telemetry, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &Telemetry{
		logger: logger,
		// W3C trace context only: a client's baggage is not relayed to the
		// model vendor on contract routes.
		prop: propagation.TraceContext{},
	}
	t.initSetCaches()
	res := t.resource(opts, getenv)

	// Metrics: the OTel SDK feeding a Prometheus collector on a private
	// registry. Names are built to be exactly the once the exporter
	// adds its suffixes; no otel_scope_* labels, no target_info. The
	// per-request metrics are kept apart, exposed as the SDK would (fast.go).
	t.registry = opts.Registry
	if t.registry == nil {
		t.registry = prometheus.NewRegistry()
		t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	var err error
	if t.mp, err = meterProvider(t.registry, res); err != nil {
		return nil, err
	}
	t.metrics = promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{ErrorLog: promLogger{logger}})
	if err := t.instruments(); err != nil {
		return nil, err
	}

	// Traces.
	exp := opts.SpanExporter
	t.exporter = ExporterCustom
	if exp == nil {
		t.exporter = ExporterNone
		if otlpWanted(getenv) {
			if p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p == "grpc" || (p == "" && getenv("OTEL_EXPORTER_OTLP_PROTOCOL") == "grpc") {
				logger.Warn("OTLP protocol grpc is not supported; exporting traces with http/protobuf")
			}
			exp, err = otlptracehttp.New(context.Background())
			if err != nil {
				return nil, fmt.Errorf("otlp trace exporter: %w", err)
			}
			t.exporter = ExporterOTLP
		}
	}
	if exp != nil {
		var proc sdktrace.SpanProcessor
		if opts.SyncExport {
			proc = sdktrace.NewSimpleSpanProcessor(exp)
		} else {
			proc = sdktrace.NewBatchSpanProcessor(exp) // OTEL_BSP_* tune it
		}
		// The sampler is the SDK's: ParentBased(AlwaysOn) unless
		// OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG say otherwise.
		t.sdkTP = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(proc))
		t.tp = t.sdkTP
	} else {
		// No destination: do not record, but keep passing the caller's
		// trace context on (a no-op span carries its remote parent).
		t.tp = noop.NewTracerProvider()
	}
	t.tracer = t.tp.Tracer(ScopeName)

	if opts.Global {
		otel.SetTextMapPropagator(t.prop)
		otel.SetTracerProvider(t.tp)
		otel.SetMeterProvider(t.mp)
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("opentelemetry error", "error", err.Error())
		}))
	}
	return t, nil
}

func otlpWanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func (t *Telemetry) resource(opts Options, getenv func(string) string) *resource.Resource {
	name := opts.ServiceName
	if name == "" {
		name = "contractd"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", opts.ServiceVersion))
	}
	r := resource.NewSchemaless(attrs...)
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the defaults.
	if getenv("OTEL_SERVICE_NAME") != "" || getenv("OTEL_RESOURCE_ATTRIBUTES") != "" {
		if env, err := resource.New(context.Background(), resource.WithFromEnv()); err == nil {
			if m, err := resource.Merge(r, env); err == nil {
				r = m
			}
		} else {
			t.logger.Warn("OTEL_RESOURCE_ATTRIBUTES ignored", "error", err.Error())
		}
	}
	return r
}

// TraceExporter names where spans go.
type TraceExporter string

// The span destinations.
const (
	ExporterOTLP   TraceExporter = "otlp"   // OTLP/HTTP, from the OTEL_EXPORTER_OTLP_* variables
	ExporterCustom TraceExporter = "custom" // Options.SpanExporter
	ExporterNone   TraceExporter = "none"
)

// Exporter names the span destination.
func (t *Telemetry) Exporter() TraceExporter { return t.exporter }

// TracerProvider is the provider contractd's spans come from.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// MeterProvider is the provider contractd's metrics come from.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.mp }

// Propagator is the W3C trace-context propagator.
func (t *Telemetry) Propagator() propagation.TextMapPropagator { return t.prop }

// Registry is the private Prometheus registry behind MetricsHandler.
func (t *Telemetry) Registry() *prometheus.Registry { return t.registry }

// MetricsHandler serves the Prometheus text exposition (GET /metrics).
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// Shutdown flushes pending spans and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.sdkTP != nil {
		errs = append(errs, t.sdkTP.Shutdown(ctx))
	}
	errs = append(errs, t.mp.Shutdown(ctx))
	return errors.Join(errs...)
}

// ForceFlush exports the spans that ended so far.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t.sdkTP != nil {
		return t.sdkTP.ForceFlush(ctx)
	}
	return nil
}

// meterProvider is the OTel SDK exporting to reg through the Prometheus
// exporter, as every metric of the SDK's is exposed.
func meterProvider(reg prometheus.Registerer, res *resource.Resource) (*sdkmetric.MeterProvider, error) {
	pe, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	return sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(pe),
		sdkmetric.WithView(view),
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter),
	), nil
}

// view gives every duration histogram (unit "s") Buckets, microseconds to
// minutes.
func view(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if i.Kind == sdkmetric.InstrumentKindHistogram && i.Unit == "s" {
		return sdkmetric.Stream{Name: i.Name, Description: i.Description, Unit: i.Unit,
			Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: Buckets}}, true
	}
	return sdkmetric.Stream{}, false
}

type promLogger struct{ l *slog.Logger }

func (p promLogger) Println(v ...any) { p.l.Warn("prometheus: " + fmt.Sprint(v...)) }
