// Package panics turns a recovered panic into what contractd may log, and
// restarts a background loop after one.
//
// A panic's value may hold anything the code that panicked had at hand: a
// message built from a request body or a model output, or a key
// (panic(fmt.Sprintf("bad input %q", s)), an error quoting what it could
// not parse). docs/security.md allows no body, prompt, output, header or
// key in the log, so the value itself is never logged: only its Go type
// and a description that holds no text of the value (Describe), beside
// the stack, which holds function names, files, lines and argument words,
// never the bytes they point at.
package panics

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"
)

// Error is a recovered panic as an error: what may be logged of it.
type Error struct {
	Type  string // the panic value's Go type ("string", "runtime.boundsError", …)
	Desc  string // Describe's description: bounded, no text of the value
	Stack []byte // the panicking goroutine's stack, from where it was recovered
}

func (e *Error) Error() string { return "panic (" + e.Type + "): " + e.Desc }

// New describes p, the value recover returned; called in the deferred
// function that recovered it, so the stack is the panic's. A p that is an
// *Error already is returned as it is.
func New(p any) *Error {
	if pe, ok := p.(*Error); ok {
		// Recovered in another goroutine and raised again where it can be
		// restarted: its own type and stack, not the re-raise's.
		return pe
	}
	typ, desc := Describe(p)
	return &Error{Type: typ, Desc: desc, Stack: debug.Stack()}
}

// maxDesc bounds a runtime error's message in the log.
const maxDesc = 200

// Describe is the panic value's Go type and a description safe to log. A
// runtime error (an index out of range, a nil map write, a nil pointer, a
// failed type assertion) is described by its message, which the runtime
// writes from numbers and type names alone, cut to 200 bytes. Any other
// value (a string, an error, a struct) may carry request or model text or
// a key, so only its length and the first 12 hex digits of the SHA-256 of
// its text (as fmt's %v prints it) describe it: the same panic gives the
// same digest, so repeats can be told apart from new ones, and the text
// stays out.
func Describe(p any) (typ, desc string) {
	typ = fmt.Sprintf("%T", p)
	if re, ok := p.(runtime.Error); ok {
		msg := re.Error()
		if len(msg) > maxDesc {
			msg = msg[:maxDesc] + "…"
		}
		return typ, msg
	}
	text := fmt.Sprint(p)
	sum := sha256.Sum256([]byte(text))
	return typ, fmt.Sprintf("value withheld (%d bytes, sha256 %s)", len(text), hex.EncodeToString(sum[:])[:12])
}

// Backoff bounds Restart's waits: the first restart after a panic waits
// BackoffMin, each panic after it twice the wait before, up to BackoffMax;
// a run that lasted BackoffMax without a panic starts again from
// BackoffMin.
var (
	BackoffMin = time.Second
	BackoffMax = time.Minute
)

// Restart runs fn until ctx ends or fn returns. A panic in fn is recovered
// and passed to onPanic (in fn's goroutine), and fn runs again after a
// backoff, so a task that panics at every run costs a log line a minute,
// not a busy loop. Use it only for a task whose every run may be cut short
// at any point without losing or repeating what it was told to keep (see
// where serve uses it).
func Restart(ctx context.Context, fn func(context.Context), onPanic func(*Error)) {
	wait := BackoffMin
	for {
		start := time.Now()
		pe := run(ctx, fn)
		if pe == nil {
			return
		}
		onPanic(pe)
		if time.Since(start) >= BackoffMax {
			wait = BackoffMin
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, BackoffMax)
	}
}

// run is one run of fn: the panic it ended with, or nil.
func run(ctx context.Context, fn func(context.Context)) (pe *Error) {
	defer func() {
		if p := recover(); p != nil {
			pe = New(p)
		}
	}()
	fn(ctx)
	return nil
}
