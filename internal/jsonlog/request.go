package jsonlog

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/contractd/contractd/internal/jsonstr"
)

// Request is the line most requests log (message "request"), as its
// fields: serve's handler writes it from them without building a
// slog.Record (RequestHandler); any other handler is given Record().
type Request struct {
	Time       time.Time
	Level      slog.Level
	RequestID  string
	Route      string
	Outcome    string
	Status     int
	Attempts   int
	DurationMS float64
	ErrorCode  string // "": no error_code attribute (a 200)
	// AuditFailed: the request's audit line was not written (audit_failed:
	// true); false writes nothing.
	AuditFailed bool
	// Traced: trace_id and span_id, the hex of TraceID and SpanID, end the
	// line (telemetry's log handler sets them from a traced context).
	Traced  bool
	TraceID [16]byte
	SpanID  [8]byte
}

// RequestHandler is a slog.Handler that writes a Request's line itself:
// exactly the bytes its Handle writes for the Request's Record(). Like
// Handle, HandleRequest does not check Enabled; the caller does.
type RequestHandler interface {
	slog.Handler
	HandleRequest(ctx context.Context, l Request) error
}

// Record is l as a slog record: its attributes request_id, route,
// outcome, status, attempts and duration_ms, then error_code and
// audit_failed when set, then trace_id and span_id when traced.
func (l *Request) Record() slog.Record {
	r := slog.NewRecord(l.Time, l.Level, "request", 0)
	r.AddAttrs(slog.String("request_id", l.RequestID), slog.String("route", l.Route),
		slog.String("outcome", l.Outcome), slog.Int("status", l.Status), slog.Int("attempts", l.Attempts),
		slog.Float64("duration_ms", l.DurationMS))
	if l.ErrorCode != "" {
		r.AddAttrs(slog.String("error_code", l.ErrorCode))
	}
	if l.AuditFailed {
		r.AddAttrs(slog.Bool("audit_failed", true))
	}
	if l.Traced {
		r.AddAttrs(slog.String("trace_id", string(appendHex(nil, l.TraceID[:]))),
			slog.String("span_id", string(appendHex(nil, l.SpanID[:]))))
	}
	return r
}

// HandleRequest writes l as Handle writes l.Record(), with one append per
// field into the line buffer: no record, no attribute walk (twice: the
// check that the fast path applies, then the write), no closure, and no
// allocation for the attributes past slog's five inline ones. A time
// outside years 0-9999 or a duration JSON cannot hold goes through Handle.
func (h *Handler) HandleRequest(ctx context.Context, l Request) error {
	if y := l.Time.Year(); (!l.Time.IsZero() && (y < 0 || y >= 10000)) || math.IsInf(l.DurationMS, 0) || math.IsNaN(l.DurationMS) {
		return h.Handle(ctx, l.Record())
	}
	lw := h.lw
	lw.mu.Lock()
	defer lw.mu.Unlock()
	b := lw.appendHead(lw.buf[:0], l.Time, l.Level, "request")
	b = append(b, `,"request_id":`...)
	b = jsonstr.AppendSlog(b, l.RequestID)
	b = append(b, `,"route":`...)
	b = jsonstr.AppendSlog(b, l.Route)
	b = append(b, `,"outcome":`...)
	b = jsonstr.AppendSlog(b, l.Outcome)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(l.Attempts), 10)
	b = append(b, `,"duration_ms":`...)
	b = appendJSONFloat(b, l.DurationMS)
	if l.ErrorCode != "" {
		b = append(b, `,"error_code":`...)
		b = jsonstr.AppendSlog(b, l.ErrorCode)
	}
	if l.AuditFailed {
		b = append(b, `,"audit_failed":true`...)
	}
	if l.Traced {
		b = append(b, `,"trace_id":"`...)
		b = appendHex(b, l.TraceID[:])
		b = append(b, `","span_id":"`...)
		b = appendHex(b, l.SpanID[:])
		b = append(b, '"')
	}
	return lw.writeLine(b)
}

const hexDigits = "0123456789abcdef"

// appendHex is id in lowercase hex, as trace.TraceID's and SpanID's String.
func appendHex(b, id []byte) []byte {
	for _, c := range id {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xF])
	}
	return b
}
