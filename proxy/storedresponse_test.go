package proxy

import (
	"net/http"
	"strings"
	"testing"
)

// TestStoredResponseNotFound: the Responses API's calls on a response by
// its id (the SDKs' responses.retrieve, delete, inputItems.list, cancel),
// at /v1/ and under /r/{route}/ (a contract route and a passthrough one),
// answer 404 response_not_found in the OpenAI envelope, with a message
// saying contractd does not store responses; after the key check (401) and
// the route's (404 model_not_found); never reaching an upstream, never
// audited. Before, each answered 404 not_found "no such endpoint: GET
// /v1/responses/resp_…", which read as a contractd without the API.
func TestStoredResponseNotFound(t *testing.T) {
	h := newHarness(t, nil, cfg{})
	const id = "resp_req_0123456789abcdef01234567"
	for _, prefix := range []string{"/v1", "/r/classify/v1", "/r/raw/v1"} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/responses/" + id},
			{"DELETE", "/responses/" + id},
			{"GET", "/responses/" + id + "/input_items?limit=5"},
			{"POST", "/responses/" + id + "/cancel"},
		} {
			url := h.front.URL + prefix + c.path
			r := send(t, h.client, c.method, url, "", clientKey)
			e := r.errorObj()
			if r.Status != http.StatusNotFound || e["type"] != "invalid_request_error" || e["code"] != "response_not_found" ||
				e["param"] != nil || r.Header.Get("X-Request-Id") == "" {
				t.Errorf("%s %s: %d %s, want 404 response_not_found with X-Request-Id", c.method, prefix+c.path, r.Status, r.Body)
				continue
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, id) || !strings.Contains(msg, "does not store responses") {
				t.Errorf("%s %s: message %q, want the id and that contractd does not store responses", c.method, prefix+c.path, msg)
			}
			if r := send(t, h.client, c.method, url, "", "wrong-key"); r.Status != http.StatusUnauthorized {
				t.Errorf("%s %s with a wrong key: %d, want 401", c.method, prefix+c.path, r.Status)
			}
		}
	}
	r := send(t, h.client, "GET", h.front.URL+"/r/nosuch/v1/responses/"+id, "", clientKey)
	if r.Status != http.StatusNotFound || r.errorObj()["code"] != "model_not_found" {
		t.Errorf("under an unknown route: %d %s, want 404 model_not_found", r.Status, r.Body)
	}
	// Other paths under /v1/responses/ are still no endpoint.
	r = send(t, h.client, "PUT", h.front.URL+"/v1/responses/"+id, "", clientKey)
	if r.Status != http.StatusNotFound || r.errorObj()["code"] != "not_found" {
		t.Errorf("PUT: %d %s", r.Status, r.Body)
	}
	if n := len(h.up.Calls()); n != 0 {
		t.Errorf("%d upstream calls, want none", n)
	}
	if evs := h.sink.Events(); len(evs) != 0 {
		t.Errorf("%d audit events, want none", len(evs))
	}
}
