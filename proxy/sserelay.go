package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
)

// A passthrough route relays an upstream event stream event by event: the
// ReverseProxy reads the upstream body through an sseRelay, which hands on
// only whole events (a blank line ends one) and ":" comment lines outside
// an event, so each Read the proxy writes and flushes is whole events.
//
// Relaying whole events is what lets a broken stream end well-formed. When
// the upstream stream breaks off (a read error, request_timeout, or the
// body ending before the stream's last event), the part of an event
// already read is dropped and one error event closes the stream instead:
// on chat completions `data: {"error":{...}}` (the error envelope, which
// go-openai and the openai SDKs raise as an API error), on the Responses
// API `event: error` with the same `error` member. The SDKs otherwise
// take a cut stream for a finished one: a last event without its blank
// line is dropped by the SSE rules, and a clean end without [DONE] looks
// like the end. The stream's last event ([DONE] on chat; on Responses
// response.completed, response.failed, response.incomplete or error; on
// chat also an upstream error event) ends the relay: what an upstream
// sends after it is not relayed, and an upstream that keeps the
// connection open after it does not keep the client waiting.
//
// An event is held until it is whole only up to relayHold bytes: a longer
// one goes out as it arrives, and if the stream breaks inside it the
// client's connection is aborted as before (the bytes already sent cannot
// be taken back, so no event could follow them well-formed).
type sseRelay struct {
	body io.ReadCloser
	call *passCall
	chat bool // chat completions: [DONE] ends the stream; else Responses events

	buf  []byte // read from the upstream and not yet handed on
	safe int    // buf[:safe] is whole events and may go out
	scan int    // buf[:scan] has been scanned

	lineStart int  // the current line's start in buf
	lineCut   bool // part of the current line went out (spilled) or was skipped
	afterCR   bool // the last line ended in \r: a \n next is part of its end
	field     bool // the current event has a field line (not only comments)
	last      bool // the current event is the stream's last
	doneLine  bool // ... and has chat's data: [DONE] line, whole
	ended     bool // the last event is whole (its blank line may end in \r\n)
	spilled   bool // part of the current event went out before its end

	done bool  // nothing more is read: buf[:safe], then err
	err  error // io.EOF, or the error that aborts the client's connection
}

// relayBuffers are the relays' read buffers, reused across streams (a
// buffer grows past relayBuffer only for an event longer than that, and
// is then left to the GC).
var relayBuffers bufferPool = make(chan []byte, 256)

const relayBuffer = 4 << 10

func (p bufferPool) get() []byte {
	select {
	case b := <-p:
		return b[:0]
	default:
		return make([]byte, 0, relayBuffer)
	}
}

// relayHold bounds the bytes of one event held back until it is whole.
// Chat chunks are a few hundred bytes; a Responses stream's
// response.completed repeats the whole output and may be longer.
const relayHold = 256 << 10

// relayedStream says whether resp is an event stream the relay can read
// (its encoding decoded by the transport, or none).
func relayedStream(resp *http.Response) bool {
	if resp.StatusCode != http.StatusOK {
		return false
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return false
	}
	return isEventStream(resp.Header.Get("Content-Type"))
}

// isEventStream says whether a Content-Type is text/event-stream, with or
// without parameters, as mime.ParseMediaType would, without its
// allocations on every passthrough reply.
func isEventStream(ct string) bool {
	const es = "text/event-stream"
	ct = strings.TrimLeft(ct, " \t")
	if len(ct) < len(es) || !strings.EqualFold(ct[:len(es)], es) {
		return false
	}
	rest := strings.TrimLeft(ct[len(es):], " \t")
	return rest == "" || rest[0] == ';'
}

func newSSERelay(body io.ReadCloser, c *passCall) *sseRelay {
	return &sseRelay{body: body, call: c, chat: c.x.edge != responsesEdge}
}

// Close closes the upstream body and gives the read buffer back (the
// proxy reads no more once it closes the body).
func (r *sseRelay) Close() error {
	if cap(r.buf) == relayBuffer {
		relayBuffers.Put(r.buf)
	}
	r.buf, r.safe, r.scan, r.lineStart, r.done, r.err = nil, 0, 0, 0, true, io.ErrClosedPipe
	return r.body.Close()
}

func (r *sseRelay) Read(p []byte) (int, error) {
	for {
		if r.safe > 0 {
			n := copy(p, r.buf[:r.safe])
			r.consume(n)
			return n, nil
		}
		if r.done {
			return 0, r.err
		}
		r.fill()
	}
}

// consume drops buf[:n], which went out.
func (r *sseRelay) consume(n int) {
	rest := copy(r.buf, r.buf[n:])
	r.buf = r.buf[:rest]
	r.safe -= n
	r.scan -= n
	r.lineStart -= n
	if r.lineStart < 0 {
		r.lineStart, r.lineCut = 0, true
	}
}

// fill reads once from the upstream and scans what came.
func (r *sseRelay) fill() {
	switch {
	case r.buf == nil:
		r.buf = relayBuffers.get()
	case len(r.buf) == cap(r.buf):
		r.buf = append(r.buf, make([]byte, min(cap(r.buf), relayHold))...)[:len(r.buf)]
	}
	n, err := r.body.Read(r.buf[len(r.buf):cap(r.buf)])
	r.buf = r.buf[:len(r.buf)+n]
	r.scanLines()
	if r.done {
		return
	}
	if r.safe == 0 && len(r.buf) >= relayHold {
		// An event this long goes out as it comes.
		r.safe, r.spilled = len(r.buf), true
	}
	if err != nil {
		r.end(err)
	}
}

// scanLines scans buf[scan:], moving safe past each whole event, and
// stops the relay after the stream's last event.
func (r *sseRelay) scanLines() {
	i := r.scan
	for i < len(r.buf) {
		if r.afterCR {
			r.afterCR = false
			c := r.buf[i]
			if c == '\n' { // the \n of a \r\n
				if r.safe == i {
					r.safe = i + 1
				}
				r.lineStart = i + 1
			}
			if r.ended {
				r.finish(io.EOF)
				return
			}
			if c == '\n' {
				i++
				continue
			}
		}
		// The next line end: a \n, or a \r before it (IndexByte is
		// vectorised; IndexAny is not).
		seg := r.buf[i:]
		j := bytes.IndexByte(seg, '\n')
		upTo := seg
		if j >= 0 {
			upTo = seg[:j]
		}
		if k := bytes.IndexByte(upTo, '\r'); k >= 0 {
			j = k
		}
		if j < 0 {
			break
		}
		i += j
		r.afterCR = r.buf[i] == '\r'
		r.line(r.buf[r.lineStart:i], i+1)
		r.lineStart, r.lineCut = i+1, false
		i++
		if r.ended && !r.afterCR {
			r.finish(io.EOF)
			return
		}
	}
	r.scan = len(r.buf)
}

// line judges one line; end is the offset just past its terminator.
func (r *sseRelay) line(l []byte, end int) {
	switch {
	case len(l) == 0 && !r.lineCut: // a blank line: the event is whole
		r.safe, r.spilled = end, false
		r.ended = r.last
		r.field = false
	case r.lineCut:
		r.field = true
	case l[0] == ':': // a comment; outside an event it goes out at once
		if !r.field {
			r.safe = end
		}
	default:
		r.field = true
		name, value := field(l)
		if r.chat {
			r.doneLine = string(name) == "data" && string(value) == "[DONE]"
			r.last = r.last || r.doneLine
			r.last = r.last || string(name) == "data" && bytes.HasPrefix(value, []byte(`{"error":`))
		} else if string(name) == "event" {
			switch string(value) {
			case "response.completed", "response.failed", "response.incomplete", "error":
				r.last = true
			}
		}
	}
}

// field splits an SSE line into its field name and value.
func field(l []byte) (name, value []byte) {
	name, value, _ = bytes.Cut(l, []byte{':'})
	return name, bytes.TrimPrefix(value, []byte{' '})
}

// finish stops the relay once buf[:safe] is out; what follows is dropped.
func (r *sseRelay) finish(err error) {
	r.buf, r.scan, r.done, r.err = r.buf[:r.safe], r.safe, true, err
}

// Errors the relay reports for a broken stream (the audit's error_code
// and the log line say which).
var (
	errStreamCut = errors.New("upstream event stream ended before its last event")
)

// end handles the upstream body's end: io.EOF after the last event was
// already seen by line; else the stream broke off.
func (r *sseRelay) end(err error) {
	c := r.call
	if r.ended { // all of it is in buf[:safe]
		r.finish(io.EOF)
		return
	}
	if c.clientCtx.Err() != nil {
		r.finish(err) // the client left: abort, as without the relay
		return
	}
	code, msg := CodeUpstreamError, "upstream "+quoteForMessage(c.route.Upstream.Name)+" stream broke off before its last event"
	if errors.Is(err, context.DeadlineExceeded) || c.Err() != nil {
		code, msg = CodeUpstreamTimeout, "request_timeout ran out before the upstream stream ended"
	}
	if err == io.EOF && r.chat && !r.lineCut && r.lineStart < len(r.buf) {
		// The body's last line, without its line end.
		if name, value := field(r.buf[r.lineStart:]); string(name) == "data" && string(value) == "[DONE]" {
			r.doneLine = true
		}
	}
	if err == io.EOF {
		if r.doneLine {
			// [DONE] without its blank line: complete the event (a
			// Responses event could be cut anywhere in its data).
			r.safe = len(r.buf)
			if r.lineStart < len(r.buf) {
				r.buf = append(r.buf, '\n')
			}
			r.buf = append(r.buf, '\n')
			r.safe = len(r.buf)
			r.done, r.err = true, io.EOF
			return
		}
		err = errStreamCut
	}
	c.broken = &APIError{Status: http.StatusOK, Type: typeUpstream, Code: code, Message: msg, Internal: err}
	c.x.logger().Warn("upstream stream broke off", "error_code", string(code), "error", err.Error(), "spilled", r.spilled)
	if r.spilled {
		// Part of this event is out: nothing well-formed can follow.
		r.finish(io.ErrUnexpectedEOF)
		return
	}
	r.finish(io.EOF)
	eo := errorObject{Message: msg, Type: typeUpstream, Code: code}
	if r.chat {
		r.buf = append(r.buf, "data: "...)
		r.buf = append(r.buf, mustJSON(errorBody{Error: eo})...)
	} else {
		r.buf = append(r.buf, "event: error\ndata: "...)
		r.buf = append(r.buf, mustJSON(responsesErrorEvent{Type: "error", Code: code, Message: msg, Error: eo})...)
	}
	r.buf = append(r.buf, "\n\n"...)
	r.safe = len(r.buf)
}

// responsesErrorEvent is the Responses API's error event, with the error
// envelope's object as "error" too: the openai SDKs raise an event whose
// data has an "error" member as an API error.
type responsesErrorEvent struct {
	Type    string      `json:"type"`
	Code    ErrorCode   `json:"code"`
	Message string      `json:"message"`
	Param   *string     `json:"param"`
	Error   errorObject `json:"error"`
}
