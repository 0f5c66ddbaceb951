package proxy

import (
	"net/http"
	"time"
)

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

var started = time.Now().Unix()

// models lists routes as OpenAI model objects; /r/{route}/v1/models lists
// that route only.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	w.Header().Set("X-Request-Id", newRequestID())
	if _, aerr := s.authenticate(st, r); aerr != nil {
		writeError(w, aerr)
		return
	}
	list := modelList{Object: "list", Data: []modelObject{}}
	if name := r.PathValue("route"); name != "" {
		if st.rt.Routes[name] == nil {
			writeError(w, &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeModelNotFound,
				Param: strPtr("model"), Message: "unknown route " + quoteForMessage(name)})
			return
		}
		list.Data = append(list.Data, modelObject{ID: name, Object: "model", Created: started, OwnedBy: "contractd"})
	} else {
		for _, rt := range st.rt.RouteList {
			list.Data = append(list.Data, modelObject{ID: rt.Name, Object: "model", Created: started, OwnedBy: "contractd"})
		}
	}
	writeJSON(w, http.StatusOK, list)
}
