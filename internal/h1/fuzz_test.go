package h1_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzTransportAgrees is TestTransportAgrees with the server's reply from
// the fuzzer (the table's replies are the seeds), for GET, HEAD and POST
// with a body, with and without Request.Close, with and without a trace of
// 1xx responses, under a header limit or not. Each exchange is bounded by
// dtTimeout, so a hang fails the input.
func FuzzTransportAgrees(f *testing.F) {
	for _, c := range dtCases() {
		if c.refused || c.keepAlivesOff || c.traceFirstByte || c.early || len(c.header) > 0 || len(c.body) > 100 {
			continue // the request side is fuzzed only as far as req below goes
		}
		var req uint8
		switch {
		case c.method == http.MethodHead:
			req = 1
		case c.body != "":
			req = 2
		}
		if c.reqClose {
			req |= 4
		}
		f.Add([]byte(c.reply), req, c.trace1xx, uint16(c.limit), c.closeAfter)
	}
	f.Fuzz(func(t *testing.T, reply []byte, req uint8, trace1xx bool, limit uint16, closeAfter bool) {
		if len(reply) > 16<<10 {
			reply = reply[:16<<10] // longer replies add nothing the shorter ones do not
		}
		c := dtCase{reply: string(reply), trace1xx: trace1xx, limit: int64(limit), closeAfter: closeAfter, reqClose: req&4 != 0}
		switch req & 3 {
		case 1:
			c.method = http.MethodHead
		case 2, 3:
			c.method, c.body = http.MethodPost, `{"model":"m"}`
		}
		needsEOF, leftover := dtFrame(reply, c.method)
		c.closeAfter = c.closeAfter || needsEOF
		c.unsolicited = leftover
		dtAgree(t, c)
	})
}

// dtFrame reads reply as a client would (1xx responses passed over, the
// body to its end) and reports whether that needs the connection's end
// (a close-delimited body, a truncated head or body: the server must
// close it or both clients wait) and whether bytes are left over after
// the response (the server sends more than it was asked for).
func dtFrame(reply []byte, method string) (needsEOF, leftover bool) {
	r := &dtEOFReader{r: bytes.NewReader(reply)}
	br := bufio.NewReader(r)
	if method == "" {
		method = http.MethodGet
	}
	req := &http.Request{Method: method}
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return r.hit, false
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// net/http may hand over the connection as the body, read
			// to its end.
			return true, false
		}
		if resp.StatusCode >= 100 && resp.StatusCode <= 199 {
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		if err != nil || r.hit {
			return true, false
		}
		return false, br.Buffered() > 0 || r.r.Len() > 0
	}
}

// dtEOFReader notes whether a read went past the end.
type dtEOFReader struct {
	r   *bytes.Reader
	hit bool
}

func (e *dtEOFReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.hit = true
	}
	return n, err
}
