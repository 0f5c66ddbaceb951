package proxy

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/contractd/contractd/config"
)

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// modelDetail is GET /v1/models/{route}: the model object with the
// contract the route enforces (null on passthrough routes), so a typed
// client can build its schema from the one contractd checks.
type modelDetail struct {
	modelObject
	Contract *modelContract `json:"contract"`
}

type modelContract struct {
	Name   string          `json:"name"`
	SHA256 string          `json:"sha256"`
	Schema json.RawMessage `json:"schema"` // as {{ schema }} prints it: compact, keys in file order
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

var started = time.Now().Unix()

func routeModel(name string) modelObject {
	return modelObject{ID: name, Object: "model", Created: started, OwnedBy: "contractd"}
}

// readAuth starts the client API's read endpoints (models, reviews): it
// stamps a request id and checks the client key, answering the 401 itself;
// st is then nil.
func (s *Server) readAuth(w http.ResponseWriter, r *http.Request) (st *state) {
	st = s.state.Load()
	w.Header().Set("X-Request-Id", newRequestID())
	if _, aerr := s.authenticate(st, r); aerr != nil {
		writeError(w, aerr)
		return nil
	}
	return st
}

// models lists routes as OpenAI model objects; /r/{route}/v1/models lists
// that route only.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	st := s.readAuth(w, r)
	if st == nil {
		return
	}
	list := modelList{Object: "list", Data: []modelObject{}}
	if name := r.PathValue("route"); name != "" {
		if st.rt.Routes[name] == nil {
			writeError(w, unknownModel(name))
			return
		}
		list.Data = append(list.Data, routeModel(name))
	} else {
		for _, rt := range st.rt.RouteList {
			list.Data = append(list.Data, routeModel(rt.Name))
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// model serves GET /v1/models/{model} and /r/{route}/v1/models/{model}
// (the SDKs' models.retrieve). Under /r/{route}/ only that route exists.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	st := s.readAuth(w, r)
	if st == nil {
		return
	}
	name := r.PathValue("model")
	route := st.rt.Routes[name]
	if pin := r.PathValue("route"); route == nil || (pin != "" && pin != name) {
		writeError(w, unknownModel(name))
		return
	}
	writeJSON(w, http.StatusOK, modelDetail{modelObject: routeModel(name), Contract: contractOf(route)})
}

// contractOf is the contract a route enforces as GET /v1/models/{route}
// shows it, nil for a passthrough route.
func contractOf(route *config.Route) *modelContract {
	if route.Passthrough || route.Contract == nil {
		return nil
	}
	k := route.Contract
	return &modelContract{Name: k.Name, SHA256: k.SHA256, Schema: json.RawMessage(k.Schema.JSON())}
}

func unknownModel(name string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeModelNotFound,
		Param: strPtr("model"), Message: "unknown route " + quoteForMessage(name)}
}
