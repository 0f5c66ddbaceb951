package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
)

// passthrough forwards the request untouched but for model and
// Authorization, relaying the reply (SSE flushed per event). A client
// disconnect cancels the upstream call through the request context.
func (s *Server) passthrough(ctx context.Context, w http.ResponseWriter, r *http.Request, x *exchange, route *config.Route, obj object) {
	body := obj.apply([]edit{{Name: "model", Value: mustJSON(route.Model)}})
	x.ev.InputSHA256 = sha(body)
	target, err := url.Parse(route.Upstream.BaseURL + "/chat/completions")
	if err != nil {
		x.fail(ctx, w, &APIError{Status: http.StatusBadGateway, Type: typeUpstream, Code: CodeUpstreamError, Message: "bad upstream URL"}, audit.OutcomeUpstreamError)
		return
	}
	status := 0
	start := time.Now()
	var failed *APIError
	rp := &httputil.ReverseProxy{
		Transport:     s.Caller.Client.Transport,
		FlushInterval: -1, // relay each SSE event at once
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = ""
			pr.Out.Body = io.NopCloser(strings.NewReader(string(body)))
			pr.Out.ContentLength = int64(len(body))
			pr.Out.Header.Set("Content-Length", itoa(len(body)))
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Accept-Encoding")
			if key := s.Caller.Keys(route.Upstream); key != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+key)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			status = resp.StatusCode
			resp.Header.Set("X-Request-Id", x.ev.RequestID)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil && ctx.Err() == nil {
				status = 499
				return // client gone: nothing to write
			}
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				failed = &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout, Message: "upstream did not answer in time"}
			} else {
				failed = &APIError{Status: http.StatusBadGateway, Type: typeUpstream, Code: CodeUpstreamError, Message: "upstream " + quoteForMessage(route.Upstream.Name) + " failed: connection failed", Internal: err}
			}
			writeError(w, failed)
		},
	}
	pctx, cancel := context.WithTimeout(ctx, route.Upstream.Timeout)
	defer cancel()
	rp.ServeHTTP(w, r.WithContext(pctx))
	x.ev.Attempts = []audit.Attempt{{Attempt: 1, UpstreamStatus: status, LatencyMS: ms(time.Since(start)), Violations: nil}}
	switch {
	case failed != nil:
		x.ev.Attempts[0].UpstreamStatus = 0
		x.finish(ctx, failed.Status, audit.OutcomeUpstreamError, failed.Code)
	default:
		x.finish(ctx, status, audit.OutcomePassthrough, "")
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
