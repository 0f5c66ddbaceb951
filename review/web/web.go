// Package web is the reviewer page (GET /review/): static HTML, CSS and
// JavaScript embedded in the binary, with no build step and no request to
// anything but the admin API of the server that served it. The page holds
// no data, so it needs no key; it asks the reviewer for the admin key and
// sends it on its own API calls.
package web

import (
	"embed"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is where the page lives.
const Prefix = "/review/"

// CSP allows the page's own files and its same-origin API calls only: no
// inline script or style, no plugin, no frame, no other origin. Model
// output is inserted as text, and this is the second line of defence.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// Handler serves the page and its assets under Prefix (GET and HEAD);
// "/review" redirects to "/review/". fail answers what it does not serve
// (status 404, or 405 with Allow set), so the server's own error envelope
// covers the page's paths too; nil answers in plain text.
func Handler(fail func(w http.ResponseWriter, r *http.Request, status int)) http.Handler {
	if fail == nil {
		fail = func(w http.ResponseWriter, r *http.Request, status int) {
			http.Error(w, strings.ToLower(http.StatusText(status)), status)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			fail(w, r, http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			fail(w, r, http.StatusNotFound)
			return
		}
		if name == "" {
			name = "index.html"
		}
		ctype := types[path.Ext(name)]
		b, err := assets.ReadFile("assets/" + name)
		if ctype == "" || strings.Contains(name, "/") || err != nil {
			fail(w, r, http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// Small files; no-cache keeps a page and its script from different
		// versions apart after an upgrade.
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	})
}
