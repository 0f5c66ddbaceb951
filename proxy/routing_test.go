package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestAPIEdgeMatchesServeMux: the match made before the ServeMux finds the
// edge, route name and pattern the ServeMux itself would, and leaves to it
// every request it would route elsewhere (or refuse).
func TestAPIEdgeMatchesServeMux(t *testing.T) {
	type match struct {
		e             *edge
		name, pattern string
	}
	var got match
	edges := 0
	mux := http.NewServeMux()
	for pat, e := range map[string]*edge{patChat: chatEdge, patRouteChat: chatEdge, patResponses: responsesEdge, patRouteResponses: responsesEdge} {
		mux.HandleFunc(pat, func(_ http.ResponseWriter, r *http.Request) { got = match{e, r.PathValue("route"), r.Pattern} })
	}
	mux.HandleFunc("GET /r/{route}/v1/models", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	for _, tc := range []struct{ method, target string }{
		{"POST", "/v1/chat/completions"},
		{"POST", "/v1/responses"},
		{"POST", "/r/triage/v1/chat/completions"},
		{"POST", "/r/triage/v1/responses"},
		{"POST", "/r/my%20route/v1/chat/completions"},
		{"POST", "/r/%C3%A9t%C3%A9/v1/responses"},
		{"POST", "/v1/chat/%63ompletions"},
		{"POST", "/r/tri%61ge/v1/chat/completions"},
		{"GET", "/v1/chat/completions"},
		{"PUT", "/r/triage/v1/chat/completions"},
		{"HEAD", "/v1/responses"},
		{"POST", "/v1/chat/completions/"},
		{"POST", "/r/triage/v1/chat/completions/"},
		{"POST", "/r/triage/v1/models"},
		{"POST", "/r/triage/x/v1/chat/completions"},
		{"POST", "/r/triage"},
		{"POST", "/r/"},
		{"POST", "/v1/chat"},
		{"POST", "/V1/chat/completions"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		got = match{}
		mux.ServeHTTP(httptest.NewRecorder(), r)
		e, name, pattern := apiEdge(r.Method, r.URL.Path)
		if want := (match{e, name, pattern}); got != want {
			t.Errorf("%s %s: apiEdge %+v, the ServeMux %+v", tc.method, tc.target, want, got)
		}
		if got.e != nil {
			edges++
		}
	}
	if edges != 8 { // the first eight requests name an edge
		t.Errorf("%d requests reached an edge, want 8", edges)
	}
}

// plainAgrees fails t when plainPath accepts target's URL but the full
// checks (cleanPath and goodRouteSegment, as exactPaths runs them) would
// not.
func plainAgrees(t *testing.T, target string) bool {
	t.Helper()
	u, err := url.ParseRequestURI(target)
	if err != nil || !plainPath(u) {
		return false
	}
	r := &http.Request{URL: u}
	if !cleanPath(u.Path) || (strings.HasPrefix(u.Path, "/r/") && !goodRouteSegment(r)) {
		t.Errorf("%q: plainPath accepts a path the full checks refuse", target)
	}
	return true
}

// TestPlainPathAgrees: the one-pass check accepts the paths requests
// usually have, and nothing the full checks would refuse.
func TestPlainPathAgrees(t *testing.T) {
	for _, p := range []string{"/v1/chat/completions", "/v1/responses", "/r/triage/v1/chat/completions",
		"/r/my_route-2~x/v1/responses", "/r/hop/v1/chat/completions/", "/r/", "/"} {
		if !plainAgrees(t, p) {
			t.Errorf("%q: not taken by plainPath", p)
		}
	}
	for _, p := range []string{"/r/tri%61ge/v1/chat/completions", "/r/a%2Fb/v1/chat/completions", "/r/./v1/chat/completions",
		"/r/../v1/chat/completions", "/r//v1/chat/completions", "//v1/chat/completions", "/r/v1.2/v1/responses", "/r/my%20route/v1/responses"} {
		if plainAgrees(t, p) {
			t.Errorf("%q: taken by plainPath, which only takes plain paths", p)
		}
	}
}

func FuzzPlainPathAgrees(f *testing.F) {
	for _, p := range []string{"/v1/chat/completions", "/r/triage/v1/chat/completions", "/r/a%2Fb/v1/x", "/r//x", "/r/../x", "/a/./b"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, target string) { plainAgrees(t, target) })
}
