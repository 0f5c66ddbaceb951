package sim

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"
)

// maxBody bounds a request body.
const maxBody = 8 << 20

// Handler serves the simulator's OpenAI-compatible API:
//
//	POST /v1/chat/completions, POST /chat/completions
//	GET  /v1/models, GET /models
//	GET  /healthz
//
// logger may be nil.
func (s *Sim) Handler(logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	mux := http.NewServeMux()
	chat := func(w http.ResponseWriter, r *http.Request) { s.chat(w, r, logger) }
	mux.HandleFunc("POST /v1/chat/completions", chat)
	mux.HandleFunc("POST /chat/completions", chat)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /models", s.models)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSONResp(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, typeInvalidRequest, codeNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func writeJSONResp(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}

// errorType and errorCode are an OpenAI error body's "type" and "code".
type (
	errorType string
	errorCode string
)

const (
	typeInvalidRequest errorType = "invalid_request_error"
	typeRateLimit      errorType = "rate_limit_error"
	typeServer         errorType = "server_error"

	codeNotFound          errorCode = "not_found"
	codeRequestTooLarge   errorCode = "request_too_large"
	codeInvalidJSON       errorCode = "invalid_json"
	codeInvalidRequest    errorCode = "invalid_request"
	codeInvalidSimMode    errorCode = "invalid_sim_mode"
	codeRateLimitExceeded errorCode = "rate_limit_exceeded"
	codeServerError       errorCode = "server_error"
)

func writeError(w http.ResponseWriter, status int, typ errorType, code errorCode, msg string) {
	writeJSONResp(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil}})
}

func (s *Sim) models(w http.ResponseWriter, r *http.Request) {
	var data []map[string]any
	for _, id := range []string{"gpt-4o-mini", "gpt-4o", "sim-1"} {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "contractd-sim"})
	}
	writeJSONResp(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Sim) chat(w http.ResponseWriter, r *http.Request, logger *slog.Logger) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, typeInvalidRequest, codeRequestTooLarge, "request body too large or unreadable")
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, typeInvalidRequest, codeInvalidJSON, "request body is not valid JSON: "+err.Error())
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, typeInvalidRequest, codeInvalidRequest, "messages must not be empty")
		return
	}
	rep, err := s.Complete(body, &req, r.Header.Get("X-Sim-Mode"))
	if err != nil {
		writeError(w, http.StatusBadRequest, typeInvalidRequest, codeInvalidSimMode, err.Error())
		return
	}
	if rep.Latency > 0 {
		t := time.NewTimer(rep.Latency)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	temp := 1.0
	if req.Temperature != nil {
		temp = *req.Temperature
	}
	logger.Info("completion", "contract", rep.Contract, "temperature", temp, "mode", string(rep.Mode),
		"status", rep.Status, "finish_reason", rep.Finish, "completion_tokens", rep.Usage.CompletionTokens)
	h := w.Header()
	h.Set("X-Sim-Mode", string(rep.Mode))
	h.Set("X-Sim-Contract", rep.Contract)
	switch rep.Status {
	case http.StatusTooManyRequests:
		h.Set("Retry-After", "0")
		writeError(w, rep.Status, typeRateLimit, codeRateLimitExceeded, "simulated rate limit (sim_mode http_429)")
		return
	case http.StatusOK:
	default:
		writeError(w, rep.Status, typeServer, codeServerError, "simulated server error (sim_mode http_500)")
		return
	}
	if req.Stream {
		s.stream(w, rep, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	var refusal *string
	if rep.Refusal != "" {
		refusal = &rep.Refusal
	}
	writeJSONResp(w, http.StatusOK, map[string]any{
		"id":      rep.ID,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   rep.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": rep.Content, "refusal": refusal},
			"logprobs":      nil,
			"finish_reason": rep.Finish,
		}},
		"usage":              rep.Usage,
		"system_fingerprint": "fp_contractd_sim",
	})
}

// stream writes the reply as chat.completion.chunk events.
func (s *Sim) stream(w http.ResponseWriter, rep *Reply, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	created := time.Now().Unix()
	send := func(delta map[string]any, finish any, usage any) {
		chunk := map[string]any{
			"id": rep.ID, "object": "chat.completion.chunk", "created": created, "model": rep.Model,
			"system_fingerprint": "fp_contractd_sim",
			"choices":            []any{},
		}
		if delta != nil {
			chunk["choices"] = []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
		}
		if usage != nil {
			chunk["usage"] = usage
		}
		b, _ := json.Marshal(chunk)
		_, _ = io.WriteString(w, "data: "+string(b)+"\n\n")
		if fl != nil {
			fl.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if rep.Refusal != "" {
		send(map[string]any{"refusal": rep.Refusal}, nil, nil)
	} else if rep.Content != nil {
		for _, piece := range chunks(*rep.Content, 24) {
			send(map[string]any{"content": piece}, nil, nil)
		}
	}
	send(map[string]any{}, rep.Finish, nil)
	if includeUsage {
		send(nil, nil, rep.Usage)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// chunks splits s into pieces of about n bytes on rune boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i := min(n, len(s))
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if len(out) == 0 {
		out = append(out, "")
	}
	return out
}
