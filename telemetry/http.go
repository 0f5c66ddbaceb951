package telemetry

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MetricHTTPDuration is the OpenTelemetry HTTP server duration metric
// (semantic conventions: http.server.request.duration), exposed as
// http_server_request_duration_seconds.
const MetricHTTPDuration = "http.server.request.duration"

// untraced are the probe and scrape endpoints: no span, no HTTP metric.
func untraced(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// Middleware wraps the API handler.
//
// When spans are recorded (a span exporter is configured), otelhttp opens
// the server span of every request: W3C trace context extracted from the
// client's headers, the HTTP semantic-convention attributes, the status.
// When they are not (the default without OTEL_EXPORTER_OTLP_*), otelhttp is
// left out entirely and only the client's traceparent, if any, is put in
// the request context, so the upstream still joins the client's trace.
//
// Either way the HTTP server metric http.server.request.duration is
// recorded here rather than by otelhttp, with the bounded attributes
// http.request.method, http.response.status_code, http.route (the mux
// pattern) and url.scheme: otelhttp's own recording builds the unbounded
// server.address (the Host header) and more per request only for a view to
// filter it out again, and costs several times more. Health, readiness and
// metrics requests are neither traced nor measured.
func (t *Telemetry) Middleware(h http.Handler) http.Handler {
	if t.sdkTP == nil {
		// One wrapper: without recorded spans the context holds at most the
		// client's remote span context, which reinject leaves as it is.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if untraced(r.URL.Path) {
				h.ServeHTTP(w, r)
				return
			}
			if r.Header.Get("Traceparent") != "" {
				r = r.WithContext(t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
			}
			t.measure(h, w, r)
		})
	}
	return otelhttp.NewHandler(t.httpMetrics(reinject(h, t.prop)), "contractd",
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(noopmetric.NewMeterProvider()),
		otelhttp.WithPropagators(t.prop),
		otelhttp.WithFilter(func(r *http.Request) bool { return !untraced(r.URL.Path) }),
	)
}

// reinject points the inbound trace headers at contractd's server span, so
// a handler that forwards the client's headers upstream (passthrough
// routes) propagates contractd's span rather than the client's.
func reinject(h http.Handler, prop propagation.TextMapPropagator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() && !sc.IsRemote() {
			r.Header.Del("Traceparent")
			r.Header.Del("Tracestate")
			prop.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
		}
		h.ServeHTTP(w, r)
	})
}

// httpMetrics records http.server.request.duration around h. It must sit
// directly above the ServeMux: the mux sets the request's Pattern (the
// http.route) on the very *http.Request it is given.
func (t *Telemetry) httpMetrics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if untraced(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		t.measure(h, w, r)
	})
}

// measure serves r with h and records its http.server.request.duration.
func (t *Telemetry) measure(h http.Handler, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	h.ServeHTTP(sw, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	t.httpSets.get(httpLabels{method: method(r.Method), status: status, route: route(r.Pattern), tls: r.TLS != nil}).
		observe(t.httpDur, time.Since(start).Seconds())
}

// method is http.request.method: a standard method, else "_OTHER".
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead,
		http.MethodOptions, http.MethodPatch, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// route is http.route: the mux pattern without its method.
func route(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}

type httpLabels struct {
	method string
	status int
	route  string
	tls    bool
}

// httpSeries are the label names and values of k's series: the
// semantic-convention attributes as the exporter named them, http_route
// left out when the request matched no pattern.
func httpSeries(k httpLabels) (names, vals []string) {
	scheme := "http"
	if k.tls {
		scheme = "https"
	}
	names = []string{"http_request_method", "http_response_status_code", "url_scheme", "http_route"}
	vals = []string{k.method, strconv.Itoa(k.status), scheme, k.route}
	if k.route == "" {
		return names[:3], vals[:3]
	}
	return names, vals
}

// statusWriter remembers the status. Unwrap lets http.ResponseController
// (ReverseProxy's flushes on passthrough streams) reach the real writer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
