// Package audit writes one JSON line per chat-completions request.
// The Event is also the record metrics are derived from, so what the audit
// says and what /metrics counts cannot drift apart.
//
// Durability: the file sink writes each event with a single write(2) on an
// O_APPEND descriptor before the request's response completes, so a clean
// shutdown or a crash of contractd loses nothing; it does not fsync per
// event (a power loss may lose the last events the OS had not flushed).
// Close fsyncs. A line that waited BlockedAfter for the sink, held by an
// earlier write that has not returned, is not written (ErrBlocked).
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contractd/contractd/contracts"
)

// EventKind is an audit line's "event".
type EventKind string

// The kinds of audit lines.
const (
	EventRequest        EventKind = "request"         // an Event
	EventReviewResolved EventKind = "review_resolved" // a ResolvedEvent
)

// Outcome is how a request ended (the event's "outcome").
type Outcome string

// Outcomes.
const (
	OutcomeValid         Outcome = "valid"
	OutcomeNeedsReview   Outcome = "needs_review"
	OutcomeRejected      Outcome = "rejected"
	OutcomeUpstreamError Outcome = "upstream_error"
	OutcomePassthrough   Outcome = "passthrough"
)

// SinkKind is audit.sink: where events go.
type SinkKind string

// The sinks.
const (
	SinkStdout SinkKind = "stdout" // the default
	SinkFile   SinkKind = "file"
	SinkNone   SinkKind = "none"
)

// Usage is token usage as the upstream reported it.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Add returns u+o.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens, u.TotalTokens + o.TotalTokens}
}

// Ref names a prompt or contract and the hash of its definition.
type Ref struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// Budget is the route's total budget and what the request used.
type Budget struct {
	MaxTotalTokens int `json:"max_total_tokens"`
	Used           int `json:"used"`
}

// Attempt is one contract attempt.
type Attempt struct {
	Attempt        int                   `json:"attempt"`
	Temperature    float64               `json:"temperature"`
	Shortened      bool                  `json:"shortened"`
	FinishReason   string                `json:"finish_reason"`
	UpstreamStatus int                   `json:"upstream_status"`
	LatencyMS      float64               `json:"latency_ms"`
	Usage          Usage                 `json:"usage"`
	Violations     []contracts.Violation `json:"violations"`
	OutputSHA256   string                `json:"output_sha256"`
	Output         *string               `json:"output,omitempty"` // include_content only
	Tries          int                   `json:"-"`                // transport tries, for metrics
	// Answered says the upstream returned a completion, so the attempt
	// has an output; metrics count an attempt without one as an upstream
	// failure (its hash is left empty when the audit sink keeps nothing).
	Answered bool `json:"-"`
}

// Event is one request's audit record.
type Event struct {
	Event       EventKind `json:"event"` // EventRequest
	Time        time.Time `json:"time"`
	RequestID   string    `json:"request_id"`
	Route       string    `json:"route"`
	API         string    `json:"api,omitempty"` // "chat" or "responses": the client-facing API
	Outcome     Outcome   `json:"outcome"`
	Status      int       `json:"status"`
	DurationMS  float64   `json:"duration_ms"`
	Prompt      *Ref      `json:"prompt"`
	Contract    *Ref      `json:"contract"`
	InputSHA256 string    `json:"input_sha256"`
	Attempts    []Attempt `json:"attempts"`
	Usage       Usage     `json:"usage"`
	Budget      *Budget   `json:"budget"`
	ErrorCode   string    `json:"error_code,omitempty"` // the client's error code when not 200
	// Deduplicated: the 422 of an identical earlier request (ReviewID) was
	// served again without calling the upstream.
	Deduplicated bool            `json:"deduplicated,omitempty"`
	ReviewID     string          `json:"review_id,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"` // include_content only
}

// Sink receives events. Write must be safe for concurrent use and must hand
// the event to its destination before returning.
type Sink interface {
	Write(ev *Event) error
	Close() error
}

// New opens the sink a config names.
func New(sink SinkKind, path string) (Sink, error) {
	switch sink {
	case "", SinkStdout:
		return newWriterSink(os.Stdout, nil, false), nil
	case SinkNone:
		return nopSink{}, nil
	case SinkFile:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit file: %w", err)
		}
		return newWriterSink(f, f, tornTail(f, path)), nil
	}
	return nil, fmt.Errorf("unknown audit sink %q", sink)
}

// NewWriter is a sink writing lines to w (tests, custom destinations).
func NewWriter(w io.Writer) Sink { return newWriterSink(w, nil, false) }

// BlockedAfter bounds how long a line waits for the sink while an earlier
// write has not returned (a disk that hangs, a pipe nobody reads): the
// request is then answered without its line, with ErrBlocked.
var BlockedAfter = 5 * time.Second

// ErrBlocked is the error of a line that waited BlockedAfter for the sink.
var ErrBlocked = errors.New("audit sink blocked: an earlier write has not returned")

// CloseWait bounds how long Close waits for a write in progress: a write
// that has not returned by then (a hung disk or mount, a pipe nobody reads)
// is left to finish, and the file is fsynced and closed when it returns,
// so no line is cut; Close returns ErrCloseDeferred meanwhile.
const CloseWait = 1 * time.Second

// ErrCloseDeferred is Close's error when a write in progress had not
// returned within CloseWait: the sink is closed to new lines, and its file
// is closed once that write returns. A reload or a shutdown goes on.
var ErrCloseDeferred = errors.New("audit sink close deferred: a write has not returned; the file is closed when it does")

// errClosed is a write to a sink Close has closed (a Switch moved on).
var errClosed = errors.New("audit sink closed")

func newWriterSink(w io.Writer, f *os.File, torn bool) *writerSink {
	return &writerSink{sem: make(chan struct{}, 1), w: w, f: f, torn: torn}
}

type writerSink struct {
	// sem is held while a line is written: a lock whose waiters give up
	// after BlockedAfter, so one write stuck in the kernel holds up only
	// its own request.
	sem    chan struct{}
	w      io.Writer
	f      *os.File
	closed bool
	// closing: Close ran; set before it waits for the write in progress,
	// so no line is written to the sink after it returns.
	closing atomic.Bool
	// torn: the destination ends in part of a line, without its newline
	// (a write cut short by a full disk, or a file found so at open): the
	// next line starts with a newline of its own, or it would be glued to
	// that part and be unreadable too, although it was written whole.
	torn bool
}

// tornTail reports whether f, opened from path, is a regular file that is
// not empty and does not end with a newline (a process before this one
// was cut off mid-line). A tail that cannot be read counts as torn: a line
// started on a line of its own costs at most an empty line.
func tornTail(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return false
	}
	r, err := os.Open(path)
	if err != nil {
		return true
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], fi.Size()-1); err != nil {
		return true
	}
	return last[0] != '\n'
}

// moved reports whether path no longer names the file s writes.
func (s *writerSink) moved(path string) bool {
	if s.f == nil {
		return false
	}
	cur, err := s.f.Stat()
	if err != nil {
		return false
	}
	fi, err := os.Stat(path)
	return err != nil || !os.SameFile(fi, cur)
}

// lock takes s.sem, waiting at most BlockedAfter.
func (s *writerSink) lock() error {
	select {
	case s.sem <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(BlockedAfter)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-t.C:
		return ErrBlocked
	}
}

// writeLine writes b, one line ending in a newline, with one write.
func (s *writerSink) writeLine(b []byte) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer func() { <-s.sem }()
	if s.closed || s.closing.Load() {
		return errClosed
	}
	if s.torn {
		b = append([]byte{'\n'}, b...) // rare: no pooled buffer for it
	}
	n, err := s.w.Write(b)
	if err == nil {
		s.torn = false
	} else if n > 0 {
		s.torn = n < len(b)
	}
	return err
}

// lineBuffers hold events being encoded, reused across events.
var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (s *writerSink) Write(ev *Event) error {
	p := lineBuffers.Get().(*[]byte)
	b, err := appendEvent((*p)[:0], ev)
	defer func() {
		if cap(b) <= 64<<10 { // an include_content line may be large: not kept
			*p = b
			lineBuffers.Put(p)
		}
	}()
	if err != nil {
		return err
	}
	return s.writeLine(b) // one write per line: O_APPEND keeps lines whole
}

// Close waits for the write in progress, so that no line is cut, at most
// CloseWait: then it returns ErrCloseDeferred and the file is closed when
// that write returns (a shutdown or a reload is not held up by a write
// that never returns). Writes after it fail with errClosed.
func (s *writerSink) Close() error {
	s.closing.Store(true)
	select {
	case s.sem <- struct{}{}:
	default:
		t := time.NewTimer(CloseWait)
		defer t.Stop()
		select {
		case s.sem <- struct{}{}:
		case <-t.C:
			go func() {
				s.sem <- struct{}{}
				_ = s.closeLocked() // nobody is left to tell
				<-s.sem
			}()
			return ErrCloseDeferred
		}
	}
	defer func() { <-s.sem }()
	return s.closeLocked()
}

// closeLocked fsyncs and closes the file (s.sem held).
func (s *writerSink) closeLocked() error {
	if s.closed || s.f == nil {
		s.closed = true
		return nil
	}
	s.closed = true
	if err := s.f.Sync(); err != nil {
		s.f.Close()
		return err
	}
	return s.f.Close()
}

// ResolvedEvent is the audit line of a review resolution.
type ResolvedEvent struct {
	Event        EventKind `json:"event"` // EventReviewResolved
	Time         time.Time `json:"time"`
	ReviewID     string    `json:"review_id"`
	Route        string    `json:"route"`
	Status       string    `json:"status"`
	By           string    `json:"by"`
	Reviewer     string    `json:"reviewer"`
	OutputSHA256 string    `json:"output_sha256"`
}

// ResolvedWriter is implemented by sinks that take review_resolved lines.
type ResolvedWriter interface {
	WriteResolved(ev *ResolvedEvent) error
}

func (s *writerSink) WriteResolved(ev *ResolvedEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return s.writeLine(append(b, '\n'))
}

type nopSink struct{}

func (nopSink) Write(*Event) error { return nil }
func (nopSink) Close() error       { return nil }
func (nopSink) Discards() bool     { return true }

// Discards reports whether sink drops every event (sink none), so a
// caller may skip work only the audit line would show (hashing a body).
// Sinks without a Discards method keep every event.
func Discards(sink Sink) bool {
	d, ok := sink.(interface{ Discards() bool })
	return ok && d.Discards()
}

// Switch is a Sink whose destination a config reload can change. A write
// goes to the sink current when it starts; Reopen closes the old sink once
// the write in progress on it has returned, and a write that finds it
// closed goes to the new one: no line is cut or lost by a reload, and a
// sink stuck in a write holds up neither the reload's other writes nor
// the reload beyond the old sink's close.
type Switch struct {
	cur atomic.Pointer[Sink]
	mu  sync.Mutex // Reopen's
	// sink and path name the current sink (mu); closed: Close ran (mu).
	sink   SinkKind
	path   string
	closed bool
	// failed counts lines the destination refused (a full disk, a closed
	// stdout, a write blocked past BlockedAfter): the request was answered
	// all the same, without its line.
	failed atomic.Int64
}

// Failed is how many lines (request and review_resolved events) could not
// be written so far.
func (s *Switch) Failed() int64 { return s.failed.Load() }

// NewSwitch opens the sink a config names behind a Switch.
func NewSwitch(sink SinkKind, path string) (*Switch, error) {
	cur, err := New(sink, path)
	if err != nil {
		return nil, err
	}
	sw := &Switch{sink: sink, path: path}
	sw.cur.Store(&cur)
	return sw, nil
}

// Reopen points the switch at sink and path when they differ from the
// current ones, or when path no longer names the file being written (moved
// away by a log rotation, removed, replaced): changed reports whether it
// opened a sink. On error the current sink stays. The old sink is closed
// after the switch's lock is released: a close that waits for a write
// holds up neither writes nor a Follow.
func (s *Switch) Reopen(sink SinkKind, path string) (changed bool, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, errClosed
	}
	cur := s.cur.Load()
	if s.sink == sink && (sink != SinkFile || s.path == path) {
		ws, ok := (*cur).(*writerSink)
		if !ok || sink != SinkFile || !ws.moved(path) {
			s.mu.Unlock()
			return false, nil
		}
	}
	old, err := s.openLocked(cur, sink, path)
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	return true, old.Close()
}

// openLocked opens sink at path and makes it current in place of cur
// (s.mu held), returning cur's sink for the caller to close.
func (s *Switch) openLocked(cur *Sink, sink SinkKind, path string) (Sink, error) {
	next, err := New(sink, path)
	if err != nil {
		return nil, err
	}
	s.cur.Store(&next)
	s.sink, s.path = sink, path
	return *cur, nil
}

// Follow reopens the file sink when its path no longer names the file
// being written (moved away by a log rotation without a reload, removed,
// replaced), as a reload would: serve calls it once a second, so the trail
// at audit.path goes on without a SIGHUP. Lines written meanwhile went to
// the moved file, whole. path is the sink's path; opened reports whether
// it opened the file anew. On error the current sink stays. The path is
// checked without the switch's lock, so a stat that hangs (a hung mount)
// holds up neither a reload nor a write.
func (s *Switch) Follow() (path string, opened bool, err error) {
	s.mu.Lock()
	cur, sink, path, closed := s.cur.Load(), s.sink, s.path, s.closed
	s.mu.Unlock()
	ws, ok := (*cur).(*writerSink)
	if closed || sink != SinkFile || !ok || !ws.moved(path) {
		return path, false, nil
	}
	s.mu.Lock()
	if s.closed || s.cur.Load() != cur { // a reload or Close came first
		s.mu.Unlock()
		return path, false, nil
	}
	old, err := s.openLocked(cur, sink, path)
	s.mu.Unlock()
	if err != nil {
		return path, false, err
	}
	return path, true, old.Close()
}

// Discards reports whether the current sink drops every event.
func (s *Switch) Discards() bool { return Discards(*s.cur.Load()) }

// write runs w on the current sink, and again on the next one when a
// Reopen closed that sink meanwhile.
func (s *Switch) write(w func(Sink) error) error {
	for {
		cur := s.cur.Load()
		err := w(*cur)
		// The sink was closed by a Reopen or a Follow meanwhile, or a
		// write stuck on it held this one up: the line goes to the next.
		if (errors.Is(err, errClosed) || errors.Is(err, ErrBlocked)) && s.cur.Load() != cur {
			continue
		}
		if err != nil {
			s.failed.Add(1)
		}
		return err
	}
}

func (s *Switch) Write(ev *Event) error {
	return s.write(func(cur Sink) error { return cur.Write(ev) })
}

// WriteResolved passes review_resolved lines to sinks that take them.
func (s *Switch) WriteResolved(ev *ResolvedEvent) error {
	return s.write(func(cur Sink) error {
		if rw, ok := cur.(ResolvedWriter); ok {
			return rw.WriteResolved(ev)
		}
		return nil
	})
}

// Close closes the current sink; Reopen and Follow open none after it.
func (s *Switch) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return (*s.cur.Load()).Close()
}
