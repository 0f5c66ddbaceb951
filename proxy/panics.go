package proxy

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/contractd/contractd/internal/panics"
)

// PanicMetrics counts recovered panics by where they happened
// (contractd_panics_total{where}). Implementations must be safe for
// concurrent use.
type PanicMetrics interface {
	Panic(where string)
}

// Where a recovered panic happened: contractd_panics_total's where label.
const (
	PanicRequest      = "request"       // a chat completions or Responses request
	PanicHandler      = "handler"       // any other HTTP handler: models, reviews, admin, the page, metrics
	PanicReviewQueue  = "review_queue"  // ReviewQueue.Run: store open, spool drain, retention, outbox purge
	PanicReviewWriter = "review_writer" // the review store's group-commit writer (the items were spooled)
	PanicWebhook      = "webhook"       // ReviewQueue.RunWebhook
	PanicDedupeSync   = "dedupe_sync"   // Server.SyncDedupe
	PanicConfigWatch  = "config_watch"  // serve's reload loop
)

type nopPanicMetrics struct{}

func (nopPanicMetrics) Panic(string) {}

// logPanic writes a recovered panic's line: what panics.Error holds (the
// value's type, a description without its text, the stack), never the
// value itself, which may hold request or model text or a key
// (docs/security.md).
func logPanic(l *slog.Logger, msg string, pe *panics.Error, attrs ...any) {
	l.Error(msg, append(attrs, "panic_type", pe.Type, "panic", pe.Desc, "stack", string(pe.Stack))...)
}

// restarting runs a background task under panics.Restart: a panic is
// logged with its stack, counted, and the task runs again after a backoff,
// instead of ending the process and every request in flight with it.
// Only tasks that may be cut short anywhere use it (see each caller).
func restarting(ctx context.Context, where string, l *slog.Logger, m PanicMetrics, fn func(context.Context)) {
	panics.Restart(ctx, fn, func(pe *panics.Error) {
		m.Panic(where)
		logPanic(l, "panic in background task; restarting it", pe, "task", where)
	})
}

// ReportPanic logs as msg (with the value's type, a description without
// it, the stack) and counts a panic that a caller outside this package
// recovered, given the value recover returned: called from the deferred
// function, the stack is the panic's.
func (s *Server) ReportPanic(msg, where string, p any) {
	s.panics().Panic(where)
	logPanic(s.Logger, msg, panics.New(p))
}

func (s *Server) panics() PanicMetrics {
	if s.Panics == nil {
		return nopPanicMetrics{}
	}
	return s.Panics
}

// RecoverPanics is the gate for the handlers that have no recovery of
// their own: everything but the chat completions and Responses edges
// (exchange.recoverPanic), i.e. models, review polls, the reviewer API,
// the page, /metrics, /healthz and /readyz. Without it net/http recovers a
// panic itself, logs the value as it is to its own error log and drops
// the connection: the client gets no answer, and no contractd log line or
// metric records it. Here a panic is logged (type, description, stack,
// request id, method and route pattern), counted (where "handler"), and
// answered 500 server_error/internal_error through writeError when no
// response has started; after one has, the connection is aborted, as
// net/http would. http.ErrAbortHandler is a deliberate abort and goes on.
func (s *Server) RecoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &startedWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			id := w.Header().Get("X-Request-Id")
			if id == "" {
				id = newRequestID()
			}
			s.panics().Panic(PanicHandler)
			logPanic(s.Logger, "panic serving request", panics.New(p), "request_id", id, "method", r.Method, "pattern", r.Pattern)
			if pw.started {
				panic(http.ErrAbortHandler)
			}
			// What the handler set for the answer it meant (an export's
			// content type) is not this answer's.
			hd := w.Header()
			clear(hd)
			hd.Set("X-Request-Id", id)
			writeError(w, errInternal())
		}()
		h.ServeHTTP(pw, r)
	})
}

// startedWriter records whether the response has started (its status
// line may have gone out), which decides between a 500 and an abort.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startedWriter) WriteHeader(code int) {
	// 1xx informational answers are not the response.
	if code >= 200 {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startedWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

// Flush sends what is written, which starts the response.
func (w *startedWriter) Flush() {
	w.started = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
