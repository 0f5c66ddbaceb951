package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// MetricAuditWriteErrors counts audit lines the sink could not write (the
// request was answered without its line).
const MetricAuditWriteErrors = "contractd_audit_write_errors_total"

// AuditMetrics registers the audit write failure counter, read from failed
// (audit.Switch.Failed) at each scrape. Its series exists from the start
// (at 0), so an increase() alert works before the first failure.
func (t *Telemetry) AuditMetrics(failed func() int64) error {
	m := t.register()
	c := m.observedCounter(MetricAuditWriteErrors, "Audit lines (request and review_resolved events) the sink could not write; those requests were answered without their line.", "{line}")
	if m.err != nil {
		return m.err
	}
	_, err := m.m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(c, failed())
		return nil
	}, c)
	return err
}
