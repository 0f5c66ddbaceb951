package telemetry

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"

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
	t.reloads = m.counter(MetricConfigReloads, "Config reloads by result (success, failure).", "{reload}")
	if m.err != nil {
		return m.err
	}
	if err := t.perRequestMetrics(); err != nil {
		return err
	}
	t.reloadOK = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "success")))
	t.reloadFail = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "failure")))
	// Both series exist from the start, so increase(...) alerts work
	// before the first failure.
	t.reloads.Add(context.Background(), 0, t.reloadOK)
	t.reloads.Add(context.Background(), 0, t.reloadFail)
	return nil
}

// perRequestMetric is a metric every request records (fast.go), by its
// OpenTelemetry name (declared as any other) and as exposed.
type perRequestMetric struct {
	name, exposed, help, unit string
	hist                      bool
}

var perRequestMetrics = []perRequestMetric{
	{MetricRequests, MetricRequests, "Chat-completions requests by route and audit outcome.", "{request}", false},
	{MetricAttempts, MetricAttempts, "Contract attempts by route, attempt number and result (valid, invalid, upstream_error).", "{attempt}", false},
	{MetricViolations, MetricViolations, "Contract violations found in model outputs, by route, kind and rule.", "{violation}", false},
	{MetricTokens, MetricTokens, "Upstream-reported tokens summed over every contract attempt, by route and direction (input, output).", "{token}", false},
	{MetricRequestDuration, MetricRequestDuration, "Whole request time as audited (duration_ms), every attempt included, by route and outcome.", "s", true},
	{MetricUpstreamDuration, MetricUpstreamDuration, "Time of one upstream call (transport retries included), by route.", "s", true},
	{MetricValidationDuration, MetricValidationDuration, "Time to extract and validate one model output, by route.", "s", true},
	{MetricHTTPDuration, "http_server_request_duration_seconds", "Duration of HTTP server requests.", "s", true},
}

func (t *Telemetry) perRequestMetrics() error {
	fs := make(families, len(perRequestMetrics))
	for i, d := range perRequestMetrics {
		if err := checkDeclared(d.name); err != nil {
			return err
		}
		fs[i] = newFamily(d.exposed, d.help, d.hist)
	}
	t.requests, t.attempts, t.violations, t.tokens = fs[0], fs[1], fs[2], fs[3]
	t.reqDur, t.upDur, t.valDur, t.httpDur = fs[4], fs[5], fs[6], fs[7]
	return t.registry.Register(fs)
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
	ro.requests.add(1)
	ro.duration.observe(t.reqDur, ev.DurationMS/1000)

	contract := ev.Contract != nil
	if len(ev.Attempts) > 0 {
		r := t.routes.get(route)
		for i := range ev.Attempts {
			a := &ev.Attempts[i]
			r.upstream.observe(t.upDur, a.LatencyMS/1000)
			if !contract {
				continue // passthrough: no contract attempt
			}
			t.attemptSets.get(attemptLabels{route, a.Attempt, AttemptResult(ev, i)}).add(1)
			for _, v := range a.Violations {
				t.violationSets.get(violationLabels{route, v.Kind, v.Rule}).add(1)
			}
		}
		if contract {
			r.input.add(int64(ev.Usage.PromptTokens))
			r.output.add(int64(ev.Usage.CompletionTokens))
		}
	}

	if t.sdkTP == nil {
		return // no span records: the context's walk for one is skipped
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
		r.upstream.observe(t.upDur, ev.Attempts[i].LatencyMS/1000)
	}
	r.input.add(int64(ev.Usage.PromptTokens))
	r.output.add(int64(ev.Usage.CompletionTokens))
}

func attemptCount(ev *audit.Event) int {
	if ev.Contract == nil {
		return 0
	}
	return len(ev.Attempts)
}

// A label combination's series are looked up once and kept here, so a
// measurement is an atomic add on a series already found. Every label
// value is bounded by the config (routes, rules, attempt numbers) or by a
// fixed list (outcomes, results, directions); maxCachedSets is a backstop
// that stops caching (the family still finds the series, under its lock),
// never counting.
const maxCachedSets = 4096

type setCache[K comparable, E any] struct {
	// m is read without a lock and replaced whole, under mu, when a set
	// is added: a lookup is a load and a map read, with no write to a
	// line every core's requests share (a read lock is one).
	m     atomic.Pointer[map[K]*E]
	mu    sync.Mutex
	build func(K) *E
}

func newSetCache[K comparable, E any](build func(K) *E) *setCache[K, E] {
	c := &setCache[K, E]{build: build}
	c.m.Store(&map[K]*E{})
	return c
}

func (c *setCache[K, E]) get(k K) *E {
	if e, ok := (*c.m.Load())[k]; ok {
		return e
	}
	e := c.build(k)
	c.mu.Lock()
	if old := *c.m.Load(); len(old) < maxCachedSets {
		m := make(map[K]*E, len(old)+1)
		maps.Copy(m, old)
		m[k] = e
		c.m.Store(&m)
	}
	c.mu.Unlock()
	return e
}

type routeOutcome struct {
	route   string
	outcome audit.Outcome
}

// outcomeSeries are a route and outcome's series.
type outcomeSeries struct{ requests, duration *series }

type attemptLabels struct {
	route   string
	attempt int
	result  Result
}

type violationLabels struct{ route, kind, rule string }

// routeSeries are one route's series: {route} of the upstream and
// validation histograms, and {route, direction} of the token counter.
type routeSeries struct{ upstream, validation, input, output *series }

var (
	labelsRoute          = []string{"route"}
	labelsRouteOutcome   = []string{"route", "outcome"}
	labelsRouteDirection = []string{"route", "direction"}
	labelsAttempt        = []string{"route", "attempt", "result"}
	labelsViolation      = []string{"route", "kind", "rule"}
)

func (t *Telemetry) initSetCaches() {
	t.routes = newSetCache(func(route string) *routeSeries {
		r := []string{route}
		return &routeSeries{
			upstream:   t.upDur.get(labelsRoute, r),
			validation: t.valDur.get(labelsRoute, r),
			input:      t.tokens.get(labelsRouteDirection, []string{route, "input"}),
			output:     t.tokens.get(labelsRouteDirection, []string{route, "output"}),
		}
	})
	t.routeOutcome = newSetCache(func(k routeOutcome) *outcomeSeries {
		v := []string{k.route, string(k.outcome)}
		return &outcomeSeries{requests: t.requests.get(labelsRouteOutcome, v), duration: t.reqDur.get(labelsRouteOutcome, v)}
	})
	t.attemptSets = newSetCache(func(k attemptLabels) *series {
		return t.attempts.get(labelsAttempt, []string{k.route, strconv.Itoa(k.attempt), string(k.result)})
	})
	t.violationSets = newSetCache(func(k violationLabels) *series {
		return t.violations.get(labelsViolation, []string{k.route, k.kind, k.rule})
	})
	t.httpSets = newSetCache(func(k httpLabels) *series { return t.httpDur.get(httpSeries(k)) })
}
