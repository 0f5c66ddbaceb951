package telemetry

import (
	"context"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/proxy"
)

// Metric names as exposed on /metrics, plus the validation
// histogram this package adds. The Prometheus exporter's suffix rules leave
// them unchanged: counters already end in _total, the histograms in _seconds.
const (
	MetricRequests           = "contractd_requests_total"
	MetricAttempts           = "contractd_attempts_total"
	MetricViolations         = "contractd_violations_total"
	MetricRequestDuration    = "contractd_request_duration_seconds"
	MetricUpstreamDuration   = "contractd_upstream_duration_seconds"
	MetricValidationDuration = "contractd_validation_duration_seconds"
	MetricTokens             = "contractd_tokens_total"
	MetricConfigReloads      = "contractd_config_reloads_total"
)

// Result is an attempt's result (label result of contractd_attempts_total).
type Result string

// Attempt results.
const (
	ResultValid         Result = "valid"
	ResultInvalid       Result = "invalid"
	ResultUpstreamError Result = "upstream_error"
)

// registration makes the instruments of one registration through the
// package's meter (declared names only), each with its description and
// unit, and keeps the first error: a registration reads as its list of
// instruments with one check at the end, instead of a check after each
// (creating one fails only for an undeclared or malformed name, so nothing
// is gained by stopping at the first).
type registration struct {
	m   declaredMeter
	err error
}

func (t *Telemetry) register() *registration { return &registration{m: t.meter()} }

func (r *registration) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *registration) counter(name, desc, unit string) metric.Int64Counter {
	c, err := r.m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	r.keep(err)
	return c
}

// seconds is a duration histogram with the package's Buckets.
func (r *registration) seconds(name, desc string) metric.Float64Histogram {
	h, err := r.m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(Buckets...))
	r.keep(err)
	return h
}

// gauge and observedCounter are read at each scrape: by a callback given
// in opts, or one registered for them with r.m.RegisterCallback.
func (r *registration) gauge(name, desc, unit string, opts ...metric.Int64ObservableGaugeOption) metric.Int64ObservableGauge {
	g, err := r.m.Int64ObservableGauge(name, append([]metric.Int64ObservableGaugeOption{metric.WithDescription(desc), metric.WithUnit(unit)}, opts...)...)
	r.keep(err)
	return g
}

func (r *registration) observedCounter(name, desc, unit string) metric.Int64ObservableCounter {
	c, err := r.m.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	r.keep(err)
	return c
}

func (t *Telemetry) instruments() error {
	m := t.register()
	t.requests = m.counter(MetricRequests, "Chat-completions requests by route and audit outcome.", "{request}")
	t.attempts = m.counter(MetricAttempts, "Contract attempts by route, attempt number and result (valid, invalid, upstream_error).", "{attempt}")
	t.violations = m.counter(MetricViolations, "Contract violations found in model outputs, by route, kind and rule.", "{violation}")
	t.tokens = m.counter(MetricTokens, "Upstream-reported tokens summed over every contract attempt, by route and direction (input, output).", "{token}")
	t.reloads = m.counter(MetricConfigReloads, "Config reloads by result (success, failure).", "{reload}")
	t.reqDur = m.seconds(MetricRequestDuration, "Whole request time as audited (duration_ms), every attempt included, by route and outcome.")
	t.upDur = m.seconds(MetricUpstreamDuration, "Time of one upstream call (transport retries included), by route.")
	t.valDur = m.seconds(MetricValidationDuration, "Time to extract and validate one model output, by route.")
	t.httpDur = m.seconds(MetricHTTPDuration, "Duration of HTTP server requests.")
	if m.err != nil {
		return m.err
	}
	t.reloadOK = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "success")))
	t.reloadFail = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "failure")))
	// Both series exist from the start, so increase(...) alerts work
	// before the first failure.
	t.reloads.Add(context.Background(), 0, t.reloadOK)
	t.reloads.Add(context.Background(), 0, t.reloadFail)
	return nil
}

// ConfigReload counts a config reload attempt.
func (t *Telemetry) ConfigReload(ok bool) {
	if ok {
		t.reloads.Add(context.Background(), 1, t.reloadOK)
		return
	}
	t.reloads.Add(context.Background(), 1, t.reloadFail)
}

// RouteLabel is the route label a finished event is counted under: the
// configured route, or "" when the request never resolved to one (auth,
// size, JSON errors, unknown route), so a client cannot create series at
// will.
func RouteLabel(ev *audit.Event) string {
	if ev.ErrorCode == string(proxy.CodeModelNotFound) {
		return ""
	}
	return ev.Route
}

// AttemptResult classifies attempt i of a contract-route event: an attempt
// the upstream did not answer failed upstream; otherwise it is valid when
// it has no violation.
func AttemptResult(ev *audit.Event, i int) Result {
	a := &ev.Attempts[i]
	switch {
	case !a.Answered,
		i == len(ev.Attempts)-1 && ev.Outcome == audit.OutcomeUpstreamError:
		return ResultUpstreamError
	case len(a.Violations) == 0:
		return ResultValid
	}
	return ResultInvalid
}

// RequestDone derives every request metric from the finished audit event
// and annotates the server span.
func (t *Telemetry) RequestDone(ctx context.Context, ev *audit.Event) {
	route := RouteLabel(ev)
	ro := t.routeOutcome.get(routeOutcome{route, ev.Outcome})
	t.requests.Add(ctx, 1, ro.add...)
	t.reqDur.Record(ctx, ev.DurationMS/1000, ro.rec...)

	contract := ev.Contract != nil
	if len(ev.Attempts) > 0 {
		r := t.routes.get(route)
		for i := range ev.Attempts {
			a := &ev.Attempts[i]
			t.upDur.Record(ctx, a.LatencyMS/1000, r.route.rec...)
			if !contract {
				continue // passthrough: no contract attempt
			}
			t.attempts.Add(ctx, 1, t.attemptSets.get(attemptLabels{route, a.Attempt, AttemptResult(ev, i)}).add...)
			for _, v := range a.Violations {
				t.violations.Add(ctx, 1, t.violationSets.get(violationLabels{route, v.Kind, v.Rule}).add...)
			}
		}
		if contract {
			t.tokens.Add(ctx, int64(ev.Usage.PromptTokens), r.input.add...)
			t.tokens.Add(ctx, int64(ev.Usage.CompletionTokens), r.output.add...)
		}
	}

	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 5)
		attrs = append(attrs,
			attrRequestID.String(ev.RequestID),
			attrOutcome.String(string(ev.Outcome)),
			attrAttempts.Int(attemptCount(ev)),
		)
		if route != "" {
			attrs = append(attrs, attrRoute.String(route))
		}
		if ev.ErrorCode != "" {
			attrs = append(attrs, attrErrorCode.String(ev.ErrorCode))
		}
		span.SetAttributes(attrs...)
	}
}

// RerunDone counts what a review rerun (POST /admin/reviews/{id}/rerun)
// spent upstream: its calls in contractd_upstream_duration_seconds and its
// tokens in contractd_tokens_total, as a request's attempts are. A rerun is
// not a chat-completions request: the request, attempt and violation
// series count the clients' requests only. ev holds the rerun's attempts
// and usage; its route is a configured contract route.
func (t *Telemetry) RerunDone(ctx context.Context, ev *audit.Event) {
	if len(ev.Attempts) == 0 {
		return
	}
	r := t.routes.get(ev.Route)
	for i := range ev.Attempts {
		t.upDur.Record(ctx, ev.Attempts[i].LatencyMS/1000, r.route.rec...)
	}
	t.tokens.Add(ctx, int64(ev.Usage.PromptTokens), r.input.add...)
	t.tokens.Add(ctx, int64(ev.Usage.CompletionTokens), r.output.add...)
}

func attemptCount(ev *audit.Event) int {
	if ev.Contract == nil {
		return 0
	}
	return len(ev.Attempts)
}

// Attribute sets are built once per label combination and reused, as
// ready-made option slices: building a set allocates and sorts, and passing
// a fresh variadic option allocates too, while a request records up to a
// dozen measurements. Every label value is bounded by the config (routes,
// rules, attempt numbers) or by a fixed list (outcomes, results,
// directions); maxCachedSets is a backstop that stops caching, never
// counting.
const maxCachedSets = 4096

// labels are one attribute set as the options the instruments take.
type labels struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newLabels(set attribute.Set) *labels {
	o := metric.WithAttributeSet(set)
	return &labels{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

type setCache[K comparable] struct {
	mu    sync.RWMutex
	m     map[K]*labels
	build func(K) attribute.Set
}

func newSetCache[K comparable](build func(K) attribute.Set) *setCache[K] {
	return &setCache[K]{m: map[K]*labels{}, build: build}
}

func (c *setCache[K]) get(k K) *labels {
	c.mu.RLock()
	l, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return l
	}
	l = newLabels(c.build(k))
	c.mu.Lock()
	if len(c.m) < maxCachedSets {
		c.m[k] = l
	}
	c.mu.Unlock()
	return l
}

type routeOutcome struct {
	route   string
	outcome audit.Outcome
}

type attemptLabels struct {
	route   string
	attempt int
	result  Result
}

type violationLabels struct{ route, kind, rule string }

// routeOpts are one route's label sets: {route}, and {route, direction}
// for the token counter.
type routeOpts struct{ route, input, output *labels }

type routeCache struct {
	mu sync.RWMutex
	m  map[string]*routeOpts
}

func (c *routeCache) get(route string) *routeOpts {
	c.mu.RLock()
	o, ok := c.m[route]
	c.mu.RUnlock()
	if ok {
		return o
	}
	r := attribute.String("route", route)
	o = &routeOpts{
		route:  newLabels(attribute.NewSet(r)),
		input:  newLabels(attribute.NewSet(r, attribute.String("direction", "input"))),
		output: newLabels(attribute.NewSet(r, attribute.String("direction", "output"))),
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*routeOpts{}
	}
	if len(c.m) < maxCachedSets {
		c.m[route] = o
	}
	c.mu.Unlock()
	return o
}

func (t *Telemetry) initSetCaches() {
	t.routeOutcome = newSetCache(func(k routeOutcome) attribute.Set {
		return attribute.NewSet(attribute.String("route", k.route), attribute.String("outcome", string(k.outcome)))
	})
	t.attemptSets = newSetCache(func(k attemptLabels) attribute.Set {
		return attribute.NewSet(attribute.String("route", k.route), attribute.String("attempt", strconv.Itoa(k.attempt)),
			attribute.String("result", string(k.result)))
	})
	t.violationSets = newSetCache(func(k violationLabels) attribute.Set {
		return attribute.NewSet(attribute.String("route", k.route), attribute.String("kind", k.kind), attribute.String("rule", k.rule))
	})
	t.httpSets = newSetCache(httpSet)
}
