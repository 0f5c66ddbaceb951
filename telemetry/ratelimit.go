package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// MetricRateLimitStoreErrors counts rate-limit store calls that failed
// (the request passed unlimited: the limiter fails open).
const MetricRateLimitStoreErrors = "contractd_rate_limit_store_errors_total"

// RateLimitMetrics counts rate-limit store failures (proxy.RateLimitMetrics).
type RateLimitMetrics struct{ errs metric.Int64Counter }

// RateLimitMetrics registers the rate-limit store counter. Its series
// exists from the start (at 0), so an increase() alert works before the
// first failure.
func (t *Telemetry) RateLimitMetrics() (*RateLimitMetrics, error) {
	c, err := t.meter().Int64Counter(MetricRateLimitStoreErrors,
		metric.WithDescription("Rate-limit store (Redis) calls that failed; those requests passed unlimited."), metric.WithUnit("{error}"))
	if err != nil {
		return nil, err
	}
	c.Add(context.Background(), 0)
	return &RateLimitMetrics{errs: c}, nil
}

// StoreError counts one failed store call.
func (r *RateLimitMetrics) StoreError() { r.errs.Add(context.Background(), 1) }
