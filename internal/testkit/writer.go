package testkit

import (
	"bytes"
	"io"
	"net/http"
	"time"
)

// SinkWriter is the least a ResponseWriter can be, for handler
// benchmarks: it keeps the status and counts the body, reusing its header
// map. It flushes and accepts deadlines like net/http's own writer on a
// real connection, so that a handler's http.ResponseController calls cost
// what they cost in production (without them each returns a fresh "not
// supported" error).
type SinkWriter struct {
	H      http.Header
	Status int
	N      int // body bytes written
}

// NewSinkWriter is a SinkWriter with an empty header map.
func NewSinkWriter() *SinkWriter { return &SinkWriter{H: http.Header{}} }

// Reset readies w for the next request, keeping the header map.
func (w *SinkWriter) Reset() {
	clear(w.H)
	w.Status, w.N = 0, 0
}

func (w *SinkWriter) Header() http.Header         { return w.H }
func (w *SinkWriter) WriteHeader(status int)      { w.Status = status }
func (w *SinkWriter) Write(b []byte) (int, error) { w.N += len(b); return len(b), nil }
func (w *SinkWriter) Flush()                      {}

func (w *SinkWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *SinkWriter) SetWriteDeadline(time.Time) error { return nil }

// JSONResponse is a 200 application/json response to r carrying body, as
// an in-memory upstream's RoundTrip returns it.
func JSONResponse(r *http.Request, body []byte) *http.Response {
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(body)),
		Body: io.NopCloser(bytes.NewReader(body)), Request: r}
}
