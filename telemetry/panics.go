package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricPanics counts panics contractd recovered, by where they happened
// (proxy.Panic*: a request, another handler, a background task).
const MetricPanics = "contractd_panics_total"

// PanicMetrics counts recovered panics (proxy.PanicMetrics).
type PanicMetrics struct{ panics metric.Int64Counter }

// PanicMetrics registers the recovered-panic counter.
func (t *Telemetry) PanicMetrics() (*PanicMetrics, error) {
	c, err := t.meter().Int64Counter(MetricPanics,
		metric.WithDescription("Panics recovered (a bug), by where: request, handler or a background task."), metric.WithUnit("{panic}"))
	if err != nil {
		return nil, err
	}
	return &PanicMetrics{panics: c}, nil
}

// Panic counts one recovered panic.
func (p *PanicMetrics) Panic(where string) {
	p.panics.Add(context.Background(), 1, metric.WithAttributes(attribute.String("where", where)))
}
