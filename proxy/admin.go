package proxy

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/contractd/contractd/review/web"
)

// reviewPage is the reviewer page; it holds no data, so it needs no key.
// What it does not serve, another method included, is 404 not_found in
// the error envelope, as on every other path of the server.
var reviewPage = web.Handler(func(w http.ResponseWriter, r *http.Request, _ int) {
	w.Header().Del("Allow")
	writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeNotFound,
		Message: "no such endpoint: " + r.Method + " " + quoteForMessage(r.URL.Path)})
})

// Admin serves /healthz, /readyz, /metrics and the reviewer page
// (/review/, no key: it holds no data). Ready turns false when draining
// starts, as the API listener stops accepting; the admin listener keeps
// answering until the requests in flight have ended.
type Admin struct {
	Metrics http.Handler // nil: /metrics answers 404
	// Reviews serves the other /admin/* paths (the reviewer API); nil: 404.
	Reviews http.Handler
	ready   atomic.Bool
}

// SetReady flips /readyz.
func (a *Admin) SetReady(v bool) { a.ready.Store(v) }

func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// X-Request-Id is on every response (requireKey may have set it).
	if w.Header().Get("X-Request-Id") == "" {
		w.Header().Set("X-Request-Id", newRequestID())
	}
	switch r.URL.Path {
	case "/healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case "/readyz":
		if !a.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	case "/metrics":
		if a.Metrics == nil {
			writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeNotFound, Message: "no such endpoint: metrics are not served"})
			return
		}
		a.Metrics.ServeHTTP(w, r)
	default:
		if r.URL.Path == "/review" || strings.HasPrefix(r.URL.Path, web.Prefix) {
			reviewPage.ServeHTTP(w, r)
			return
		}
		if a.Reviews != nil && strings.HasPrefix(r.URL.Path, "/admin/") {
			a.Reviews.ServeHTTP(w, r)
			return
		}
		writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeNotFound, Message: "no such endpoint"})
	}
}
