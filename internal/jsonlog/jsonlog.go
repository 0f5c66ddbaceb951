// Package jsonlog is contractd's log handler: the lines slog.JSONHandler
// writes, byte for byte, with less code for the per-request line.
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/contractd/contractd/internal/jsonstr"
)

// Handler writes what slog.NewJSONHandler(w, &slog.HandlerOptions{Level:
// level}) writes, byte for byte, with less code per line for the records
// nearly every line is: the per-request `request` line, whose attributes
// are strings, integers, a float and (with a span) the trace ids. Such a
// record is appended to one buffer by the few functions below instead of
// slog's general path (a handle state from a pool, a key and a value
// dispatch per attribute, and encoding/json by reflection for every float);
// on a quiet machine that general path costs about as much as the code
// here, but it is run once per request with cold caches at low concurrency,
// where its size shows (docs/benchmarks.md, "The hop over sockets").
//
// Any record with something else (an attribute of kind Any, Time, Group or
// LogValuer, an empty key, a float JSON cannot hold, a time outside years
// 0-9999), and every handler derived with WithAttrs or WithGroup, goes to
// the slog.JSONHandler itself, which writes through the same lock: lines
// never interleave, whichever path wrote them (TestJSONHandlerMatchesSlog).
type Handler struct {
	level slog.Leveler
	slow  slog.Handler // slog.NewJSONHandler over lw
	lw    *lockedWriter
}

// lockedWriter serialises whole lines to w: each Write is one line.
type lockedWriter struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte    // the fast path's line, built and written under mu
	clock timeCache // the fast path's time, under mu
}

// timeCache writes a time as time.RFC3339Nano does, from the formatted
// second ("2006-01-02T15:04:05") and zone ("Z" or "-07:00") of the last
// time it wrote: lines come many to a second, and formatting the date and
// the zone costs more than the line's other fields. A second's zone offset
// is fixed (offsets change on whole seconds), so the second's Unix time
// and the Location name them.
type timeCache struct {
	sec  int64
	loc  *time.Location
	head []byte // the second, then the zone: head[:19] and head[19:]
}

// append appends t (years 0-9999) as t.AppendFormat(b, time.RFC3339Nano).
func (c *timeCache) append(b []byte, t time.Time) []byte {
	sec, ns := t.Unix(), t.Nanosecond()
	if c.head == nil || sec != c.sec || t.Location() != c.loc {
		c.head = t.Add(-time.Duration(ns)).AppendFormat(c.head[:0], time.RFC3339Nano)
		c.sec, c.loc = sec, t.Location()
	}
	b = append(b, c.head[:19]...)
	if ns != 0 { // nine digits, trailing zeros dropped, as .999999999 writes them
		var frac [10]byte
		frac[0] = '.'
		for i, v := 9, ns; i > 0; i-- {
			frac[i] = byte('0' + v%10)
			v /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, c.head[19:]...)
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// New is a Handler writing to w at level (Info when nil).
func New(w io.Writer, level slog.Leveler) *Handler {
	lw := &lockedWriter{w: w, buf: make([]byte, 0, 512)}
	return &Handler{level: level, slow: slog.NewJSONHandler(lw, &slog.HandlerOptions{Level: level}), lw: lw}
}

// Enabled is slog's: the level at least the configured one (Info when nil).
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	minLevel := slog.LevelInfo
	if h.level != nil {
		minLevel = h.level.Level()
	}
	return l >= minLevel
}

func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler { return h.slow.WithAttrs(as) }
func (h *Handler) WithGroup(name string) slog.Handler    { return h.slow.WithGroup(name) }

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !plainRecord(r) {
		return h.slow.Handle(ctx, r)
	}
	lw := h.lw
	lw.mu.Lock()
	defer lw.mu.Unlock()
	b := lw.appendHead(lw.buf[:0], r.Time, r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, ',')
		b = jsonstr.AppendSlog(b, a.Key)
		b = append(b, ':')
		v := a.Value
		switch v.Kind() {
		case slog.KindString:
			b = jsonstr.AppendSlog(b, v.String())
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindFloat64:
			b = appendJSONFloat(b, v.Float64())
		case slog.KindBool:
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindDuration:
			b = strconv.AppendInt(b, int64(v.Duration()), 10)
		}
		return true
	})
	return lw.writeLine(b)
}

// appendHead is a line's start as slog writes it: '{', the time (unless
// zero), the level and the message.
func (lw *lockedWriter) appendHead(b []byte, t time.Time, level slog.Level, msg string) []byte {
	b = append(b, '{')
	if !t.IsZero() {
		b = append(b, `"time":"`...)
		b = lw.clock.append(b, t)
		b = append(b, `",`...)
	}
	b = append(b, `"level":`...)
	b = jsonstr.AppendSlog(b, level.String())
	b = append(b, `,"msg":`...)
	return jsonstr.AppendSlog(b, msg)
}

// writeLine ends the line in b (built in l.buf, under l.mu) and writes it,
// keeping the buffer for the next line unless it grew large.
func (l *lockedWriter) writeLine(b []byte) error {
	b = append(b, '}', '\n')
	_, err := l.w.Write(b)
	if cap(b) <= maxKeptLine { // one long line does not stay held
		l.buf = b
	} else {
		l.buf = nil
	}
	return err
}

// plainRecord reports whether the fast path writes r as slog would: every
// attribute a non-empty key with a scalar value, every float finite, the
// time (if any) within years 0-9999.
func plainRecord(r slog.Record) bool {
	if !r.Time.IsZero() {
		if y := r.Time.Year(); y < 0 || y >= 10000 {
			return false
		}
	}
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "" {
			ok = false
			return false
		}
		switch v := a.Value; v.Kind() {
		case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration:
		case slog.KindFloat64:
			f := v.Float64()
			ok = !math.IsInf(f, 0) && !math.IsNaN(f)
		default:
			ok = false
		}
		return ok
	})
	return ok
}

// appendJSONFloat is encoding/json's float64: as ES6 numbers convert to
// strings, exponent form below 1e-6 and from 1e21, the exponent unpadded.
// (slog.JSONHandler calls json.Marshal for floats.) f is finite.
func appendJSONFloat(b []byte, f float64) []byte {
	if b, ok := appendThousandths(b, f); ok {
		return b
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendThousandths writes f as appendJSONFloat would when f is a whole
// number of thousandths n/1000 (the double nearest it) from 0 up to 1e9,
// as a request line's duration_ms (whole microseconds) is: the decimal
// n/1000 without trailing zeros, written from n. Below 1e9 two doubles
// are far less than 0.001 apart, so that decimal is the shortest one that
// reads back as f, which is what strconv's shortest form writes. Anything
// else (false) is left to strconv.
func appendThousandths(b []byte, f float64) ([]byte, bool) {
	if !(f >= 0 && f < 1e9) || math.Signbit(f) {
		return b, false
	}
	n := int64(f*1000 + 0.5)
	if float64(n)/1000 != f {
		return b, false
	}
	b = strconv.AppendInt(b, n/1000, 10)
	if frac := n % 1000; frac != 0 {
		d := [4]byte{'.', byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
		k := len(d)
		for d[k-1] == '0' {
			k--
		}
		b = append(b, d[:k]...)
	}
	return b, true
}

// maxKeptLine is the largest line buffer kept for the next line.
const maxKeptLine = 16 << 10
