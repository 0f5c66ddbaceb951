package proxy

import (
	"context"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
)

// AttemptInfo describes an attempt about to run.
type AttemptInfo struct {
	Route       string
	Model       string
	Attempt     int
	Temperature float64
}

// AttemptResult is what an attempt produced.
type AttemptResult struct {
	Err           error
	Usage         audit.Usage
	Finish        string
	Violations    []contracts.Violation
	UpstreamModel string
}

// Telemetry receives the pipeline's events for traces and metrics. The
// request-level numbers come from the finished audit event so metrics and
// audit agree (its input_sha256 and input are left empty when the audit
// sink drops every event: audit.Discards). Implementations must be safe
// for concurrent use.
type Telemetry interface {
	StartAttempt(ctx context.Context, a AttemptInfo) (context.Context, func(AttemptResult))
	StartValidation(ctx context.Context) (context.Context, func(violations int))
	RequestDone(ctx context.Context, ev *audit.Event)
}

// RerunTelemetry is implemented by a Telemetry that counts what review
// reruns spend upstream (their attempts are in ev, which is not audited).
type RerunTelemetry interface {
	RerunDone(ctx context.Context, ev *audit.Event)
}

type nopTelemetry struct{}

func (nopTelemetry) StartAttempt(ctx context.Context, _ AttemptInfo) (context.Context, func(AttemptResult)) {
	return ctx, func(AttemptResult) {}
}
func (nopTelemetry) StartValidation(ctx context.Context) (context.Context, func(int)) {
	return ctx, func(int) {}
}
func (nopTelemetry) RequestDone(context.Context, *audit.Event) {}
