package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/proxy"
)

// reloadCounter counts config reloads by result.
type reloadCounter interface{ ConfigReload(ok bool) }

type nopTel struct{}

func (nopTel) StartAttempt(ctx context.Context, _ proxy.AttemptInfo) (context.Context, func(proxy.AttemptResult)) {
	return ctx, func(proxy.AttemptResult) {}
}
func (nopTel) StartValidation(ctx context.Context) (context.Context, func(int)) { return ctx, func(int) {} }
func (nopTel) RequestDone(context.Context, *audit.Event)                      {}
func (nopTel) ConfigReload(bool)                                               {}

// setupTelemetry is replaced by the telemetry package wiring (issue 4).
func setupTelemetry(ctx context.Context, logger *slog.Logger) (interface {
	proxy.Telemetry
	reloadCounter
}, http.Handler, func(context.Context) error, error) {
	return nopTel{}, nil, func(context.Context) error { return nil }, nil
}

func wrapHTTP(h http.Handler) http.Handler { return h }
