package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/contractd/contractd/internal/jsonlog"
)

// LogHandler wraps h so that every record logged with a context holding a
// valid span gets trace_id and span_id attributes, joining log lines to
// traces (the request_id attribute already joins them to the audit).
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(traceHandler); ok {
		return h
	}
	return traceHandler{h}
}

type traceHandler struct{ next slog.Handler }

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// HandleRequest is Handle for the request line given as its fields
// (jsonlog.RequestHandler): the trace ids set from ctx as Handle adds
// them, and the line handed on as fields when the next handler writes
// them itself, else as its record.
func (h traceHandler) HandleRequest(ctx context.Context, l jsonlog.Request) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		l.Traced, l.TraceID, l.SpanID = true, sc.TraceID(), sc.SpanID()
	}
	if rh, ok := h.next.(jsonlog.RequestHandler); ok {
		return rh.HandleRequest(ctx, l)
	}
	return h.next.Handle(ctx, l.Record())
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.next.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.next.WithGroup(name)}
}
