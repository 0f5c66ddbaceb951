// Package logbuf batches a process's log lines into few writes.
//
// A busy proxy logs one line per request; written one by one that is a
// write system call per request, which on a small machine costs about as
// much as formatting the line. Lines written here are held in memory and
// written out together within a short interval, when the buffer fills, and
// on Flush or Close. Logs are not contractd's durable record (the audit
// is): a process killed outright loses at most the last interval's lines.
package logbuf

import (
	"io"
	"sync"
	"time"
)

// DefaultInterval is how long a line may wait before it is written.
const DefaultInterval = 100 * time.Millisecond

// size is the buffer that is written out at once when it fills before
// the interval ends.
const size = 64 << 10

// Writer buffers writes to w. It is safe for concurrent use.
type Writer struct {
	w     io.Writer
	every time.Duration

	mu      sync.Mutex
	buf     []byte
	timer   *time.Timer // runs flush; armed while the buffer holds lines
	armed   bool
	closed  bool
	lastErr error // the last failed write to w, reported once by Write
}

// New returns a Writer to w that writes what it holds at least every
// interval (DefaultInterval when interval <= 0).
func New(w io.Writer, interval time.Duration) *Writer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Writer{w: w, every: interval, buf: make([]byte, 0, size)}
}

// Write holds p until the next flush. After Close it writes p through at
// once, so late lines (a shutdown's last words) are not lost.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	if err := b.lastErr; err != nil {
		b.lastErr = nil
		return 0, err
	}
	if len(b.buf)+len(p) > size {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) >= size {
			return b.w.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	if !b.armed {
		b.armed = true
		if b.timer == nil {
			b.timer = time.AfterFunc(b.every, b.flushTimer)
		} else {
			b.timer.Reset(b.every)
		}
	}
	return len(p), nil
}

func (b *Writer) flushTimer() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	if err := b.flushLocked(); err != nil {
		b.lastErr = err
	}
}

// Flush writes out what is held.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *Writer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// Close writes out what is held and stops the interval; later writes go
// straight to the underlying writer. It does not close that writer.
func (b *Writer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.armed = false
	return b.flushLocked()
}
