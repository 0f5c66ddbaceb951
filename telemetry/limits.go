package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// the limits as metrics.
const (
	MetricConnectionsOpen = "contractd_connections_open"
	MetricInflightBytes   = "contractd_inflight_bytes"
	MetricServerBusy      = "contractd_server_busy_total"
	MetricMemoryLimit     = "contractd_memory_limit_bytes"
)

// LimitStats is what LimitMetrics reads at each scrape.
type LimitStats struct {
	Connections   int64 // open on listen
	InflightBytes int64 // request bodies and upstream replies held
	RefusedBusy   int64 // requests refused 503 server_busy so far
	MemoryLimit   int64 // Go's soft memory limit in force, 0 for none
}

// LimitMetrics registers the connection, in-flight and busy instruments,
// read from stats at each scrape.
func (t *Telemetry) LimitMetrics(stats func() LimitStats) error {
	m := t.register()
	conns := m.gauge(MetricConnectionsOpen, "Connections open on listen (server.max_connections caps them; the admin listener is not counted).", "{connection}")
	inflight := m.gauge(MetricInflightBytes, "Request bodies and upstream replies held at once (server.max_inflight_bytes caps them).", "By")
	busy := m.observedCounter(MetricServerBusy, "Requests refused 503 server_busy: no room in max_inflight_bytes within 1 s.", "{request}")
	limit := m.gauge(MetricMemoryLimit, "Go's soft memory limit in force (server.memory_limit or GOMEMLIMIT); 0: none.", "By")
	if m.err != nil {
		return m.err
	}
	_, err := m.m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(conns, s.Connections)
		o.ObserveInt64(inflight, s.InflightBytes)
		o.ObserveInt64(busy, s.RefusedBusy)
		o.ObserveInt64(limit, s.MemoryLimit)
		return nil
	}, conns, inflight, busy, limit)
	return err
}
