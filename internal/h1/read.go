package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// readSimple reads a response whose head is simple and already whole in
// br's buffer, building the *http.Response http.ReadResponse would build
// from it, field for field, at a fraction of the cost: one string holds
// the head, and the header's keys and values are substrings of it.
// Anything else it declines (ok false) having consumed nothing, and the
// caller reads the response with http.ReadResponse.
//
// Simple is what upstreams send in practice: "HTTP/1.1 NNN reason" with
// a final status (200-599), CRLF line ends, no folded lines, keys that
// are tokens and values of printable ASCII or tabs, at most 63 header
// lines, no Transfer-Encoding or Trailer, and either exactly one
// Content-Length of digits or no body (a reply to HEAD, a 204 or a 304).
//
// When br's buffer is empty it reads once to fill it, as
// http.ReadResponse would first; a failed read is its answer then (ok
// true), the error http.ReadResponse gives for it.
func readSimple(br *bufio.Reader, req *http.Request) (resp *http.Response, ok bool, err error) {
	if br.Buffered() == 0 {
		if _, err := br.Peek(1); err != nil {
			// Peek hands the read's error over once; ReadResponse would
			// have returned it, EOF meaning the head was cut short.
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, true, err
		}
	}
	buf, _ := br.Peek(br.Buffered())
	// Each line's end (its CR) up to the blank line ending the head, in
	// one pass.
	var ends [64]int
	lines, end := 0, -1
	for i := 0; end < 0; {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return nil, false, nil // the head is not all here
		}
		j += i
		switch {
		case j == i || buf[j-1] != '\r':
			return nil, false, nil // a bare LF
		case j-1 == i:
			end = i
		case lines == len(ends):
			return nil, false, nil
		default:
			ends[lines] = j - 1
			lines++
		}
		i = j + 1
	}
	if lines == 0 {
		return nil, false, nil
	}
	code, ok := statusLine(buf[:ends[0]])
	if !ok {
		return nil, false, nil
	}
	s := string(buf[:end])
	h := make(http.Header, lines-1)
	r := new(simpleResponse)
	vals := r.vals[:] // one backing array, a value for each key
	if lines-1 > len(r.vals) {
		vals = make([]string, lines-1)
	}
	var key [64]byte
	for l := 1; l < lines; l++ {
		i := ends[l-1] + 2
		line := buf[i:ends[l]]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || colon > len(key) {
			return nil, false, nil
		}
		k, canonical := key[:colon], true
		upper := true
		for j, c := range line[:colon] {
			if !httpguts.IsTokenRune(rune(c)) {
				return nil, false, nil
			}
			switch {
			case upper && 'a' <= c && c <= 'z':
				c -= 'a' - 'A'
				canonical = false
			case !upper && 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
				canonical = false
			}
			k[j] = c
			upper = c == '-'
		}
		for _, c := range line[colon+1:] {
			if (c < ' ' && c != '\t') || c > '~' {
				return nil, false, nil
			}
		}
		name := s[i : i+colon]
		if !canonical {
			if name, ok = commonKeys[string(k)]; !ok {
				name = string(k)
			}
		}
		// textproto trims the value's spaces and tabs at both ends.
		vs, ve := i+colon+1, ends[l]
		for vs < ve && (s[vs] == ' ' || s[vs] == '\t') {
			vs++
		}
		for ve > vs && (s[ve-1] == ' ' || s[ve-1] == '\t') {
			ve--
		}
		if vv := h[name]; vv == nil {
			vals[0] = s[vs:ve]
			h[name], vals = vals[:1:1], vals[1:]
		} else {
			h[name] = append(vv, s[vs:ve])
		}
	}
	if _, ok := h["Transfer-Encoding"]; ok {
		return nil, false, nil
	}
	if _, ok := h["Trailer"]; ok {
		return nil, false, nil
	}
	length := int64(-1)
	if cl := h["Content-Length"]; len(cl) > 1 {
		return nil, false, nil
	} else if len(cl) == 1 {
		if length, ok = digits(cl[0]); !ok {
			return nil, false, nil
		}
	}
	resp = &r.resp
	*resp = http.Response{
		Status: s[len("HTTP/1.1 "):ends[0]], StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Request: req, Body: http.NoBody,
	}
	// From here on, as http.ReadResponse's readTransfer decides.
	if httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		resp.Close = true
		delete(h, "Connection")
	}
	switch {
	case req != nil && req.Method == http.MethodHead:
		resp.ContentLength = length // -1 when there is none
	case code == http.StatusNoContent || code == http.StatusNotModified:
		resp.ContentLength = 0
	case length < 0:
		return nil, false, nil // the body runs to the connection's end
	default:
		resp.ContentLength = length
		if length > 0 {
			r.body = lengthBody{r: br, n: length, closing: resp.Close}
			resp.Body = &r.body
		}
	}
	if p := h["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	br.Discard(end + 2)
	return resp, true, nil
}

// simpleResponse is what readSimple allocates in one piece: the
// response, its body and the backing of the header's values when they are
// few.
type simpleResponse struct {
	resp http.Response
	body lengthBody
	vals [8]string
}

// statusLine parses a status line, "HTTP/1.1 NNN reason" (the reason
// may be empty, or absent with its space), for a final status.
func statusLine(b []byte) (code int, ok bool) {
	const proto = "HTTP/1.1 "
	if len(b) < len(proto)+3 || string(b[:len(proto)]) != proto {
		return 0, false
	}
	for _, c := range b[len(proto) : len(proto)+3] {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code > 599 {
		return 0, false // 1xx go round readResponse's loop; others are odd
	}
	rest := b[len(proto)+3:]
	if len(rest) > 0 && rest[0] != ' ' {
		return 0, false
	}
	for _, c := range rest {
		if (c < ' ' && c != '\t') || c > '~' {
			return 0, false
		}
	}
	return code, true
}

// digits parses a Content-Length as net/http does, for one of digits
// only.
func digits(v string) (int64, bool) {
	if v == "" {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(v, 10, 63)
	return int64(n), err == nil
}

// commonKeys are header keys upstreams send in lower case (Python
// servers, some gateways), canonical, so that they cost no string.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Access-Control-Allow-Origin", "Alt-Svc", "Cache-Control", "Cf-Ray",
		"Connection", "Content-Encoding", "Content-Length", "Content-Type",
		"Date", "Etag", "Keep-Alive", "Openai-Model", "Openai-Organization",
		"Openai-Processing-Ms", "Openai-Version", "Server", "Set-Cookie",
		"Strict-Transport-Security", "Vary", "X-Content-Type-Options",
		"X-Ratelimit-Limit-Requests", "X-Ratelimit-Limit-Tokens",
		"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Remaining-Tokens",
		"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens", "X-Request-Id",
	} {
		m[k] = k
	}
	return m
}()

// lengthBody is the body of a response with a Content-Length, read from
// the connection's reader: what net/http's body over an io.LimitedReader
// does for a reader of a response. It returns io.EOF together with the
// last bytes, io.ErrUnexpectedEOF when the connection ends before them,
// and io.EOF on every read after either (body in h1.go gives the
// connection back on that first io.EOF).
type lengthBody struct {
	r       *bufio.Reader
	n       int64 // bytes of the body not yet read
	closing bool  // the response's Close
	eof     bool
	closed  bool
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.n <= 0 {
		// Only after an error that came with the last bytes.
		b.eof = true
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	switch {
	case err == io.EOF:
		b.eof = true
		if b.n > 0 {
			err = io.ErrUnexpectedEOF
		}
	case err == nil && n > 0 && b.n == 0:
		b.eof = true
		err = io.EOF
	}
	return n, err
}

// Close reads what is left of the body, unless the connection is to be
// closed anyway, as net/http's does. body in h1.go never calls it: it
// closes the connection instead.
func (b *lengthBody) Close() error {
	if b.closed {
		return nil
	}
	var err error
	if !b.eof && !b.closing {
		_, err = io.Copy(io.Discard, b)
	}
	b.closed = true
	return err
}
