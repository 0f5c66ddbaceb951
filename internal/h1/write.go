package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req on w, byte for byte as req.Write(w) would, with
// the same writes to what w wraps, the same error, the body closed and the
// trace's WroteRequest called as req.Write does them. Request.Write spends
// most of its time in general machinery (fmt for the first two lines, a
// transfer writer, a pooled sorter for the header); this writes the common
// request (a request line and header that fit w's free buffer, no body or
// one of a known length, no transfer coding) in one append into w's
// buffer, and hands everything else to req.Write.
func writeRequest(w *bufio.Writer, req *http.Request) (err error) {
	trace := httptrace.ContextClientTrace(req.Context())
	head, ok := fastHead(w, req, trace)
	if !ok {
		return req.Write(w)
	}
	if trace != nil && trace.WroteRequest != nil {
		defer func() { trace.WroteRequest(httptrace.WroteRequestInfo{Err: err}) }()
	}
	// Within w's free buffer the write fails only with w's error from
	// before, which Request.Write's first write returns too.
	if _, err := w.Write(head); err != nil {
		closeBody(req)
		return err
	}
	if req.Body == nil {
		return nil
	}
	return writeBody(w, req)
}

// fastHead returns req's head, built in w's free buffer, or false when
// req is one for Request.Write: declined by appendHead, or with a head
// that would make w flush part-way through it (Request.Write's writes are
// then the ones to make).
func fastHead(w *bufio.Writer, req *http.Request, trace *httptrace.ClientTrace) ([]byte, bool) {
	head, ok := appendHead(w.AvailableBuffer(), req, trace)
	return head, ok && len(head) <= w.Available()
}

// writeBody writes req's body of req.ContentLength bytes after its head,
// as Request.Write does: the head flushed first unless the body is empty
// or a reader known not to block, the body copied through w.ReadFrom
// (which flushes a full buffer first, even for http.NoBody) and what is
// left of it read to count it, the body closed once whatever happens.
func writeBody(w *bufio.Writer, req *http.Request) error {
	body, inMemory := unwrapBody(req.Body)
	if !inMemory && req.ContentLength != 0 {
		if err := w.Flush(); err != nil {
			req.Body.Close()
			return err
		}
	}
	// A bytes.Reader no longer than the length reads as the limit would
	// let it, without the limit's allocation.
	var src io.Reader = body
	if br, ok := body.(*bytes.Reader); !ok || int64(br.Len()) > req.ContentLength {
		src = &io.LimitedReader{R: body, N: req.ContentLength}
	}
	n, err := w.ReadFrom(src)
	if err == nil {
		var extra int64
		extra, err = io.Copy(io.Discard, body)
		n += extra
	}
	if err != nil {
		req.Body.Close()
		return bodyError{err}
	}
	if err := req.Body.Close(); err != nil {
		return err
	}
	if n != req.ContentLength {
		return fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
	}
	return nil
}

// bodyError is a failure while copying the body (its read, or the write
// of what was read), which Request.Write returns in a type of its own
// with the same message and nothing to unwrap; so does this.
type bodyError struct{ error }

// appendHead appends req's request line and header to b as Request.Write
// writes them, or reports false for a request it leaves to Request.Write:
// one that Request.Write rejects, probes, writes chunked or with trailers,
// reports header by header to the trace, or whose Host it rewrites (an
// internationalised name, an IPv6 zone).
func appendHead(b []byte, req *http.Request, trace *httptrace.ClientTrace) ([]byte, bool) {
	u := req.URL
	switch {
	case u == nil || u.Opaque != "" || req.Method == "CONNECT",
		len(req.TransferEncoding) > 0 || req.Trailer != nil,
		trace != nil && (trace.WroteHeaderField != nil || trace.WroteHeaders != nil):
		return b, false
	}
	noBody := req.Body == nil || req.Body == http.NoBody
	if noBody && req.ContentLength != 0 || !noBody && req.ContentLength <= 0 {
		return b, false // an error, or a body of unknown length (probed, chunked)
	}
	host := req.Host
	if host == "" {
		host = u.Host
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return b, false
		}
	}
	if !httpguts.ValidHostHeader(host) {
		host = "" // as Request.Write sends it
	}
	if strings.HasPrefix(host, "[") && strings.Contains(host, "%") {
		return b, false
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	query := u.ForceQuery || u.RawQuery != ""
	if hasCTL(path) || query && hasCTL(u.RawQuery) {
		return b, false // Request.Write's error
	}

	// One pass over the header: the User-Agent, whether a Connection
	// field is there, and the fields written as they are, in a stack
	// array unless there are many.
	var arr [24]field
	fields := arr[:0]
	ua, hasUA := "", false
	for k, vv := range req.Header {
		switch k {
		case "User-Agent":
			hasUA = true
			if len(vv) > 0 {
				ua = vv[0]
			}
			continue
		case "Connection":
			if req.Close && vv != nil {
				return b, false // its close token is looked for
			}
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		fields = append(fields, field{k, vv})
	}
	if !hasUA {
		ua = "Go-http-client/1.1"
	}

	method := req.Method
	if method == "" {
		method = "GET"
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	if query {
		b = append(b, '?')
		b = append(b, u.RawQuery...)
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	if ua != "" {
		b = append(b, "User-Agent: "...)
		b = appendValue(b, ua)
		b = append(b, "\r\n"...)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	if req.ContentLength > 0 || req.Method == "POST" || req.Method == "PUT" || req.Method == "PATCH" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, req.ContentLength, 10)
		b = append(b, "\r\n"...)
	}
	// Sorted by name; names that are not tokens left out, as
	// Request.Write leaves them.
	sortFields(fields)
	for _, f := range fields {
		if !httpguts.ValidHeaderFieldName(f.name) {
			continue
		}
		for _, v := range f.values {
			b = append(b, f.name...)
			b = append(b, ": "...)
			b = appendValue(b, v)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "\r\n"...), true
}

type field struct {
	name   string
	values []string
}

// sortFields sorts by name (names are a map's keys: distinct), by
// insertion while there are few.
func sortFields(fs []field) {
	if len(fs) > 12 {
		slices.SortFunc(fs, func(a, b field) int { return strings.Compare(a.name, b.name) })
		return
	}
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].name < fs[j-1].name; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

// appendValue appends a field value as Request.Write writes it: CR and LF
// made spaces, then spaces, tabs (and so the CRs and LFs) trimmed at both
// ends. Trimming first and replacing after comes to the same.
func appendValue(b []byte, v string) []byte {
	v = textproto.TrimString(v)
	if strings.IndexByte(v, '\r') < 0 && strings.IndexByte(v, '\n') < 0 {
		return append(b, v...)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// The types io.NopCloser returns, as net/http tells them apart.
var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(struct {
		io.Reader
		io.WriterTo
	}{}))
)

// unwrapBody returns the reader Request.Write copies the body from (the
// one an io.NopCloser wraps, or the body), and whether net/http knows it
// for a reader of memory that does not block, so that the head and the
// body may go out in one write.
func unwrapBody(rc io.ReadCloser) (io.Reader, bool) {
	var r io.Reader = rc
	t := reflect.TypeOf(rc)
	if t == nopCloserType || t == nopCloserWriterToType {
		r = reflect.ValueOf(rc).Field(0).Interface().(io.Reader)
	}
	return r, inMemory(r)
}

func inMemory(r io.Reader) bool {
	switch r.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	if t := reflect.TypeOf(r); t == nopCloserType || t == nopCloserWriterToType {
		return inMemory(reflect.ValueOf(r).Field(0).Interface().(io.Reader))
	}
	return false
}
