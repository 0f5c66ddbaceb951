package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	h := Handler(nil)
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/review/", 200, "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"GET", "/review/index.html", 200, "text/html; charset=utf-8", "<title>"},
		{"GET", "/review/app.js", 200, "text/javascript; charset=utf-8", `"use strict"`},
		{"GET", "/review/style.css", 200, "text/css; charset=utf-8", ":root"},
		{"HEAD", "/review/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/review", 301, "", ""},
		{"GET", "/review/nope.js", 404, "", ""},
		{"GET", "/review/assets/app.js", 404, "", ""},
		{"GET", "/review/../web.go", 404, "", ""},
		{"GET", "/review/web.go", 404, "", ""},
		{"GET", "/other", 404, "", ""},
		{"POST", "/review/", 405, "", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, res.StatusCode, tc.status)
			continue
		}
		if tc.status == 301 && res.Header.Get("Location") != Prefix {
			t.Errorf("redirect to %q", res.Header.Get("Location"))
		}
		if tc.status != 200 {
			continue
		}
		if got := res.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("%s: Content-Type %q", tc.path, got)
		}
		if res.Header.Get("Content-Security-Policy") != CSP || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", tc.path, res.Header)
		}
		if tc.method == "HEAD" && len(body) != 0 || !strings.Contains(string(body), tc.body) {
			t.Errorf("%s %s: body %.80q", tc.method, tc.path, body)
		}
	}
}

// The page's own files keep to the CSP: no inline script, style or event
// handler, no other origin, and no innerHTML anywhere in the script.
func TestAssetsKeepToTheCSP(t *testing.T) {
	html, _ := assets.ReadFile("assets/index.html")
	js, _ := assets.ReadFile("assets/app.js")
	for _, bad := range []string{"<script>", "<style", " style=", " on", "http://", "https://", "//cdn"} {
		if strings.Contains(strings.ToLower(string(html)), bad) {
			t.Errorf("index.html holds %q", bad)
		}
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http://", "https://"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js holds %q", bad)
		}
	}
	if !strings.Contains(CSP, "default-src 'self'") || strings.Contains(CSP, "unsafe") {
		t.Errorf("CSP %q", CSP)
	}
}

var _ http.Handler = Handler(nil)
