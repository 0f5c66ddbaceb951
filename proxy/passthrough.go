package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
)

// passthrough forwards the request untouched but for model and
// Authorization, relaying the reply (SSE flushed per event). A client
// disconnect cancels the upstream call through the request context.
func (s *Server) passthrough(ctx context.Context, w http.ResponseWriter, r *http.Request, x *exchange, route *config.Route, obj object) {
	body := obj.apply([]edit{{Name: "model", Value: mustJSON(route.Model)}})
	x.ev.InputSHA256 = sha(body)
	if x.st.rt.Audit.IncludeContent {
		x.ev.Input = body // the forwarded request; a relayed stream is not captured
	}
	target, err := url.Parse(route.Upstream.BaseURL + x.edge.upstreamPath)
	if err != nil {
		x.fail(ctx, w, &APIError{Status: http.StatusBadGateway, Type: typeUpstream, Code: CodeUpstreamError, Message: "bad upstream URL"}, audit.OutcomeUpstreamError)
		return
	}
	status := 0
	start := time.Now()
	var failed *APIError
	clientCtx := r.Context() // ends when the client goes away
	// ReverseProxy aborts the handler with panic(http.ErrAbortHandler) when
	// copying the body fails after the headers went out (client gone, or
	// the upstream stream broke). Record the request before re-panicking:
	// every chat request is audited.
	defer func() {
		if p := recover(); p != nil {
			x.ev.Attempts = []audit.Attempt{{Attempt: 1, UpstreamStatus: status, LatencyMS: ms(time.Since(start)), Violations: []contracts.Violation{}}}
			if clientCtx.Err() != nil {
				x.finish(ctx, 499, audit.OutcomeRejected, "client_closed_request")
			} else { // the upstream stream broke or timed out mid-way
				x.finish(ctx, status, audit.OutcomeUpstreamError, CodeUpstreamError)
			}
			panic(p)
		}
	}()
	// The upstream timeout bounds the wait for response headers only: a
	// healthy stream may run longer, bounded by request_timeout (ctx). The
	// timer starts once a max_concurrency slot is held, as on contract
	// routes: queueing counts against request_timeout, not the call.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var headerTimer *time.Timer
	rp := &httputil.ReverseProxy{
		Transport: s.Caller.Client.Transport,
		// No periodic flush: a reply of known length goes out in as few
		// writes as net/http can make. ReverseProxy itself flushes after
		// every read for text/event-stream and for replies of unknown
		// length, so each SSE event is still relayed at once.
		FlushInterval: 0,
		BufferPool:    copyBuffers,
		// Its own complaints (e.g. a body copy cut short) go to our
		// structured log with the request id, not to the standard logger.
		ErrorLog: slog.NewLogLogger(x.logger().Handler(), slog.LevelWarn),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = ""
			pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			pr.Out.ContentLength = int64(len(body))
			pr.Out.Header.Set("Content-Length", itoa(len(body)))
			pr.Out.Header.Del("Authorization")
			if key := s.Caller.Keys(route.Upstream); key != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+key)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			headerTimer.Stop()
			status = resp.StatusCode
			// Without a Content-Length header the reply completes only when
			// the handler returns, i.e. after the audit event is written
			// (audit before the response completes): net/http then sends a
			// short reply with the length it counted, a longer one chunked.
			// resp.ContentLength stays, so ReverseProxy knows the reply is
			// not a stream and does not flush it read by read.
			resp.Header.Del("Content-Length")
			// The response already carries contractd's X-Request-Id (set in
			// chat); ReverseProxy adds the upstream's headers to it, so drop
			// the upstream's own id rather than send two.
			resp.Header.Del("X-Request-Id")
			if resp.StatusCode >= 400 {
				// An error body may echo what the upstream was sent: the
				// key, as contract routes' 502 messages redact.
				resp.ContentLength = -1 // redacting changes the length
				return redactBody(resp, s.Caller.Keys(route.Upstream), bearerToken(r))
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// r is the outgoing request, whose context also ends at the
			// upstream timeout, so ask the client's own context whether the
			// client left; the timeout must answer 504, not an empty 200.
			if clientCtx.Err() != nil {
				status = 499
				return // client gone: nothing to write
			}
			if errors.Is(err, context.DeadlineExceeded) || r.Context().Err() != nil {
				failed = &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout, Message: "upstream did not answer in time"}
			} else {
				failed = &APIError{Status: http.StatusBadGateway, Type: typeUpstream, Code: CodeUpstreamError, Message: "upstream " + quoteForMessage(route.Upstream.Name) + " failed: connection failed", Internal: err}
			}
			writeError(w, failed)
		},
	}
	// max_concurrency caps every call to the upstream, passthrough too.
	release, err := s.Caller.sem.acquire(ctx, route.Upstream)
	if err != nil {
		x.ev.Attempts = []audit.Attempt{{Attempt: 1, Violations: []contracts.Violation{}}}
		x.fail(ctx, w, &APIError{Status: http.StatusGatewayTimeout, Type: typeUpstream, Code: CodeUpstreamTimeout,
			Message: "upstream " + quoteForMessage(route.Upstream.Name) + " is at max_concurrency and no slot freed in time"}, audit.OutcomeUpstreamError)
		return
	}
	defer release()
	headerTimer = time.AfterFunc(route.Upstream.Timeout, cancel)
	defer headerTimer.Stop()
	rp.ServeHTTP(w, r.WithContext(pctx))
	// violations: [] as on contract attempts (the audit line has a list, not null).
	x.ev.Attempts = []audit.Attempt{{Attempt: 1, UpstreamStatus: status, LatencyMS: ms(time.Since(start)), Violations: []contracts.Violation{}}}
	switch {
	case failed != nil:
		x.ev.Attempts[0].UpstreamStatus = 0
		x.finish(ctx, failed.Status, audit.OutcomeUpstreamError, failed.Code)
	case status == 499:
		x.ev.Attempts[0].UpstreamStatus = 0
		x.finish(ctx, status, audit.OutcomeRejected, "client_closed_request")
	default:
		x.finish(ctx, status, audit.OutcomePassthrough, "")
	}
}

// maxErrorBody bounds what is read of a relayed upstream error body; the
// rest is dropped (error bodies are short; this is not the reply budget).
const maxErrorBody = 1 << 20

// redactBody replaces resp's body by its redacted text: each key given and
// anything shaped like a key become [redacted]. A gzip body is decoded
// first (the client's Accept-Encoding is forwarded); a body in another
// encoding cannot be scanned and is withheld.
func redactBody(resp *http.Response, keys ...string) error {
	defer resp.Body.Close()
	var src io.Reader = resp.Body
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			src = strings.NewReader("")
			break
		}
		defer zr.Close()
		src = zr
	default:
		src = strings.NewReader(`{"error":{"message":` + string(mustJSON("upstream error body withheld: it could not be checked for secrets (Content-Encoding "+enc+")")) + `,"type":"upstream_error","code":"upstream_error","param":null}}`)
		resp.Header.Set("Content-Type", "application/json")
	}
	b, err := io.ReadAll(io.LimitReader(src, maxErrorBody))
	if err != nil && len(b) == 0 {
		return err
	}
	msg := string(b)
	for _, k := range keys {
		msg = redact(msg, k)
	}
	resp.Header.Del("Content-Encoding")
	resp.Body = io.NopCloser(strings.NewReader(msg))
	return nil
}

// copyBuffers are ReverseProxy's 32 KiB copy buffers, reused across
// requests instead of allocated per reply (a channel: no allocation to
// put one back, unlike a sync.Pool of slices).
var copyBuffers bufferPool = make(chan []byte, 256)

type bufferPool chan []byte

func (p bufferPool) Get() []byte {
	select {
	case b := <-p:
		return b
	default:
		return make([]byte, 32<<10)
	}
}

func (p bufferPool) Put(b []byte) {
	select {
	case p <- b:
	default:
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
