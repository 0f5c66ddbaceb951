package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/telemetry"
)

// reloadCounter counts config reloads by result.
type reloadCounter interface{ ConfigReload(ok bool) }

// activeTelemetry is what setupTelemetry built, for wrapHTTP. serve sets
// it up once per process.
var activeTelemetry *telemetry.Telemetry

// setupTelemetry builds traces (OTLP/HTTP when OTEL_EXPORTER_OTLP_* names an
// endpoint), metrics (the /metrics handler, private registry) and installs
// the W3C propagator the upstream caller uses. It also makes logger add
// trace_id and span_id to records logged with a traced context.
func setupTelemetry(ctx context.Context, logger *slog.Logger) (interface {
	proxy.Telemetry
	reloadCounter
}, http.Handler, func(context.Context) error, error) {
	// Swap the handler in place: serve hands this same *Logger to the proxy
	// after this call, so request lines carry trace ids as well as request_id.
	*logger = *slog.New(telemetry.LogHandler(logger.Handler()))
	t, err := telemetry.New(telemetry.Options{
		ServiceVersion: buildVersion(),
		Logger:         logger,
		Global:         true,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	activeTelemetry = t
	logger.Info("telemetry", "traces", t.Exporter(), "metrics", "/metrics")
	return t, t.MetricsHandler(), t.Shutdown, nil
}

// wrapHTTP adds the server span and HTTP server metrics to the API handler.
func wrapHTTP(h http.Handler) http.Handler {
	if activeTelemetry == nil {
		return h
	}
	return activeTelemetry.Middleware(h)
}
