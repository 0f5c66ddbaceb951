package telemetry

import (
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/metric"
)

// declaredMetrics is every metric this package creates. The package's
// meter (Telemetry.meter) creates an instrument only under a name listed
// here and fails otherwise, so a metric cannot be added without being
// declared; and TestMetricsDocumented holds every name here to
// docs/observability.md's metric table and to what /metrics exposes.
var declaredMetrics = []string{
	MetricRequests,
	MetricAttempts,
	MetricViolations,
	MetricRequestDuration,
	MetricUpstreamDuration,
	MetricValidationDuration,
	MetricTokens,
	MetricConfigReloads,
	MetricHTTPDuration,
	MetricConnectionsOpen,
	MetricInflightBytes,
	MetricServerBusy,
	MetricMemoryLimit,
	MetricRateLimitStoreErrors,
	MetricAuditWriteErrors,
	MetricReviewsPending,
	MetricReviewsResolved,
	MetricReviewStoreErrors,
	MetricReviewItemsLost,
	MetricWebhookDeliveries,
	MetricDedupeEntries,
	MetricDedupeEvictions,
	MetricPanics,
}

// DeclaredMetrics is every metric name this package may create.
func DeclaredMetrics() []string { return slices.Clone(declaredMetrics) }

// errUndeclaredMetric is an instrument asked for under a name not in
// declaredMetrics.
type errUndeclaredMetric string

func (e errUndeclaredMetric) Error() string {
	return fmt.Sprintf("telemetry: metric %s is not declared (add it to declaredMetrics in telemetry/declared.go, and document it)", string(e))
}

func checkDeclared(name string) error {
	if !slices.Contains(declaredMetrics, name) {
		return errUndeclaredMetric(name)
	}
	return nil
}

// meter is the package's one way to create instruments.
func (t *Telemetry) meter() declaredMeter { return declaredMeter{t.mp.Meter(ScopeName)} }

// declaredMeter is a metric.Meter whose every instrument constructor
// refuses a name that is not declared.
type declaredMeter struct{ metric.Meter }

func (m declaredMeter) Int64Counter(name string, o ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Int64Counter(name, o...)
}

func (m declaredMeter) Int64UpDownCounter(name string, o ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Int64UpDownCounter(name, o...)
}

func (m declaredMeter) Int64Histogram(name string, o ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Int64Histogram(name, o...)
}

func (m declaredMeter) Int64Gauge(name string, o ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Int64Gauge(name, o...)
}

func (m declaredMeter) Int64ObservableCounter(name string, o ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Int64ObservableCounter(name, o...)
}

func (m declaredMeter) Int64ObservableUpDownCounter(name string, o ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Int64ObservableUpDownCounter(name, o...)
}

func (m declaredMeter) Int64ObservableGauge(name string, o ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Int64ObservableGauge(name, o...)
}

func (m declaredMeter) Float64Counter(name string, o ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Float64Counter(name, o...)
}

func (m declaredMeter) Float64UpDownCounter(name string, o ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Float64UpDownCounter(name, o...)
}

func (m declaredMeter) Float64Histogram(name string, o ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Float64Histogram(name, o...)
}

func (m declaredMeter) Float64Gauge(name string, o ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Float64Gauge(name, o...)
}

func (m declaredMeter) Float64ObservableCounter(name string, o ...metric.Float64ObservableCounterOption) (metric.Float64ObservableCounter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Float64ObservableCounter(name, o...)
}

func (m declaredMeter) Float64ObservableUpDownCounter(name string, o ...metric.Float64ObservableUpDownCounterOption) (metric.Float64ObservableUpDownCounter, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Float64ObservableUpDownCounter(name, o...)
}

func (m declaredMeter) Float64ObservableGauge(name string, o ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	if err := checkDeclared(name); err != nil {
		return nil, err
	}
	return m.Meter.Float64ObservableGauge(name, o...)
}
