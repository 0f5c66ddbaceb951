package proxy

import "net/http"

// storedResponsePatterns are the Responses API's calls on a response by its
// id: the SDKs' responses.retrieve, responses.delete,
// responses.inputItems.list and responses.cancel.
var storedResponsePatterns = []string{
	"GET /v1/responses/{id}", "DELETE /v1/responses/{id}",
	"GET /v1/responses/{id}/input_items", "POST /v1/responses/{id}/cancel",
	"GET /r/{route}/v1/responses/{id}", "DELETE /r/{route}/v1/responses/{id}",
	"GET /r/{route}/v1/responses/{id}/input_items", "POST /r/{route}/v1/responses/{id}/cancel",
}

// storedResponse answers a call on a response by its id. contractd keeps
// no response for later (store is accepted and ignored, background is
// refused), so no id names one: 404 response_not_found saying so, after
// the key check and, under /r/{route}/, the route's. Before, these paths
// answered "no such endpoint" (not_found), which read as a contractd that
// lacked the API rather than a response it did not keep.
func (s *Server) storedResponse(w http.ResponseWriter, r *http.Request) {
	st := s.readAuth(w, r)
	if st == nil {
		return
	}
	if name := r.PathValue("route"); name != "" && st.rt.Routes[name] == nil {
		writeError(w, unknownModel(name))
		return
	}
	writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeResponseNotFound,
		Message: "response " + quoteForMessage(r.PathValue("id")) + " not found: contractd does not store responses " +
			"(store is accepted and ignored), so none can be retrieved, deleted, listed or cancelled by its id; " +
			"each POST /v1/responses answers in full"})
}
