package telemetry

import (
	"errors"
	"testing"
)

// The package's meter creates instruments only under a declared name:
// a metric nobody declared (and so nobody documented) fails where it is
// registered, at serve's start, instead of appearing on /metrics
// unchecked. Before, any name was created, and only a hand-kept list in
// the docs test stood between a new metric and the docs.
func TestUndeclaredMetricRefused(t *testing.T) {
	tel, err := New(Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	m := tel.meter()
	if _, err := m.Int64Counter("contractd_not_declared_total"); !errors.As(err, new(errUndeclaredMetric)) {
		t.Errorf("Int64Counter of an undeclared name: %v, want errUndeclaredMetric", err)
	}
	if _, err := m.Float64ObservableGauge("contractd_not_declared"); err == nil {
		t.Error("Float64ObservableGauge of an undeclared name was created")
	}
	for _, name := range DeclaredMetrics() {
		if err := checkDeclared(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := m.Int64Counter(MetricPanics); err != nil {
		t.Errorf("a declared name: %v", err)
	}
}
