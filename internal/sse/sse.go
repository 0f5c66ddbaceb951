// Package sse reads Server-Sent Events (the text/event-stream format of the
// WHATWG HTML standard, §9.2) as OpenAI-compatible streaming endpoints send
// them: "data:" lines, blank-line separated events, ":" comments and the
// final "data: [DONE]".
//
// The reader is bounded: a line longer than MaxLine bytes or an event whose
// data grows past MaxEvent bytes is an error (ErrLineTooLong,
// ErrEventTooLarge), so a hostile or broken peer cannot make it buffer
// without limit. Lines end with "\r\n", "\n" or a lone "\r"; a leading UTF-8
// byte order mark is skipped. At end of input an event that was not
// terminated by a blank line is dropped, as the standard requires.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// Default bounds.
const (
	DefaultMaxLine  = 1 << 20 // 1 MiB
	DefaultMaxEvent = 8 << 20 // 8 MiB
)

// Errors.
var (
	ErrLineTooLong   = errors.New("sse: line too long")
	ErrEventTooLarge = errors.New("sse: event too large")
)

// Done is the data OpenAI sends as the last event of a stream.
const Done = "[DONE]"

// Event is one dispatched event.
type Event struct {
	// Type is the "event:" field ("" means the default type "message").
	Type string
	// Data is the "data:" lines joined with "\n".
	Data string
	// ID is the last "id:" field seen in the stream so far (it persists
	// across events, as the standard's last event ID buffer does).
	ID string
	// Retry is the last valid "retry:" field in milliseconds, -1 if none.
	Retry int
}

// IsDone reports whether the event is OpenAI's end-of-stream marker.
func (e Event) IsDone() bool { return e.Data == Done }

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	br *bufio.Reader
	// MaxLine bounds one line's bytes (terminator excluded).
	MaxLine int
	// MaxEvent bounds one event's data bytes.
	MaxEvent int

	started bool // BOM checked
	afterCR bool // the last line ended with \r: skip one \n
	lastID  string
	retry   int
	line    []byte
	data    bytes.Buffer
	typ     string
	hasData bool
	err     error // sticky
}

// NewReader returns a Reader over r with the default bounds.
func NewReader(r io.Reader) *Reader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 16<<10)
	}
	return &Reader{br: br, MaxLine: DefaultMaxLine, MaxEvent: DefaultMaxEvent, retry: -1}
}

// Next returns the next event. At the end of the stream it returns io.EOF
// (a final event without its terminating blank line is dropped); a read
// error or a bound being exceeded is returned as is and is sticky.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	if r.MaxLine <= 0 {
		r.MaxLine = DefaultMaxLine
	}
	if r.MaxEvent <= 0 {
		r.MaxEvent = DefaultMaxEvent
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF {
				r.reset()
			}
			r.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			if !r.hasData {
				r.typ = "" // nothing to dispatch
				continue
			}
			ev := Event{Type: r.typ, Data: r.data.String(), ID: r.lastID, Retry: r.retry}
			r.reset()
			return ev, nil
		}
		if err := r.field(line); err != nil {
			r.err = err
			return Event{}, err
		}
	}
}

func (r *Reader) reset() {
	r.data.Reset()
	r.typ = ""
	r.hasData = false
}

// field processes one non-empty line.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		extra := len(value)
		if r.hasData {
			extra++
		}
		if r.data.Len()+extra > r.MaxEvent {
			return ErrEventTooLarge
		}
		if r.hasData {
			r.data.WriteByte('\n')
		}
		r.data.Write(value)
		r.hasData = true
	case "event":
		r.typ = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	case "retry":
		if n, ok := digits(value); ok {
			r.retry = n
		}
	}
	return nil // unknown fields are ignored
}

// digits parses an ASCII-digits-only value (the standard's retry rule).
func digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil
}

// readLine returns the next line without its terminator. It returns io.EOF
// only when no byte of a new line was read; a last line without a
// terminator is returned as a line (then io.EOF on the next call). A "\r"
// ends the line at once (no look-ahead that could block on a live stream);
// a "\n" right after it is skipped on the next call.
func (r *Reader) readLine() ([]byte, error) {
	if !r.started {
		r.started = true
		// Look further only when the first byte can start a BOM, so a
		// short first packet never makes the reader wait.
		if b, err := r.br.Peek(1); err == nil && b[0] == 0xEF {
			if b, err := r.br.Peek(3); err == nil && b[1] == 0xBB && b[2] == 0xBF {
				_, _ = r.br.Discard(3)
			}
		}
	}
	r.line = r.line[:0]
	for {
		c, err := r.br.ReadByte()
		if err != nil {
			r.afterCR = false
			if err == io.EOF && len(r.line) > 0 {
				return r.line, nil
			}
			return nil, err
		}
		if r.afterCR {
			r.afterCR = false
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\n':
			return r.line, nil
		case '\r':
			r.afterCR = true
			return r.line, nil
		}
		if len(r.line) >= r.MaxLine {
			return nil, ErrLineTooLong
		}
		r.line = append(r.line, c)
		// Fast path: copy the buffered run of ordinary bytes at once.
		if buf, _ := r.br.Peek(r.br.Buffered()); len(buf) > 0 {
			i := bytes.IndexAny(buf, "\r\n")
			if i < 0 {
				i = len(buf)
			}
			if len(r.line)+i > r.MaxLine {
				return nil, ErrLineTooLong
			}
			r.line = append(r.line, buf[:i]...)
			_, _ = r.br.Discard(i)
		}
	}
}
