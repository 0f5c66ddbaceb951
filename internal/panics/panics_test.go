package panics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const secret = "sk-live-0123456789abcdef the customer's email body"

// A value that may hold request text or a key is described by its type,
// length and digest, never its text; a runtime error by the runtime's own
// message, bounded.
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		name     string
		p        any
		typ      string
		has, not string
	}{
		{"string", secret, "string", "value withheld (50 bytes, sha256 ", secret},
		{"error", fmt.Errorf("decoding %q: %w", secret, errors.New("eof")), "*fmt.wrapError", "value withheld", "sk-live"},
		{"struct", struct{ Key string }{secret}, "struct { Key string }", "value withheld", "sk-live"},
		{"runtime error", indexPanic(5), "runtime.boundsError", "index out of range [5] with length 3", ""},
		{"nil map", nilMapPanic(), "runtime.plainError", "assignment to entry in nil map", ""},
	} {
		typ, desc := Describe(c.p)
		if typ != c.typ || !strings.Contains(desc, c.has) || (c.not != "" && strings.Contains(desc, c.not)) {
			t.Errorf("%s: Describe = %q, %q; want type %q, %q in it and not %q", c.name, typ, desc, c.typ, c.has, c.not)
		}
	}
	if _, a := Describe(secret); func() bool { _, b := Describe(secret); return a != b }() {
		t.Error("the same value described twice differs")
	}
	if _, a := Describe(secret + "!"); a == func() string { _, b := Describe(secret); return b }() {
		t.Error("two values have one description")
	}
	if _, d := Describe(longRuntimeError{}); len(d) > maxDesc+len("…") {
		t.Errorf("a runtime error's message is not bounded: %d bytes", len(d))
	}
}

type longRuntimeError struct{}

func (longRuntimeError) Error() string { return strings.Repeat("x", 10000) }
func (longRuntimeError) RuntimeError() {}

func indexPanic(i int) (p any) {
	defer func() { p = recover() }()
	s := []int{1, 2, 3}
	_ = s[i]
	return nil
}

func nilMapPanic() (p any) {
	defer func() { p = recover() }()
	var m map[string]int
	m["x"] = 1
	return nil
}

// Restart runs the task again after each panic, with the stack of the
// panic, until the task returns; it returns at once when ctx ends.
func TestRestart(t *testing.T) {
	BackoffMin, BackoffMax = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { BackoffMin, BackoffMax = time.Second, time.Minute })
	var runs atomic.Int32
	var got []*Error
	Restart(context.Background(), func(context.Context) {
		if runs.Add(1) <= 3 {
			panic(secret)
		}
	}, func(e *Error) { got = append(got, e) })
	if runs.Load() != 4 || len(got) != 3 {
		t.Fatalf("%d runs, %d panics reported; want 4 and 3", runs.Load(), len(got))
	}
	if e := got[0]; e.Type != "string" || strings.Contains(e.Error(), "sk-live") || !strings.Contains(string(e.Stack), "panics.TestRestart") {
		t.Errorf("reported %q with stack:\n%s", e.Error(), e.Stack)
	}

	ctx, cancel := context.WithCancel(context.Background())
	BackoffMin = time.Hour
	done := make(chan struct{})
	go func() {
		defer close(done)
		Restart(ctx, func(context.Context) { panic("again") }, func(*Error) { cancel() })
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Restart waited out its backoff after ctx ended")
	}
}

// A panic recovered in a goroutine a task started and raised again in the
// task (as an *Error) is reported with the first panic's type and stack,
// not as a value of type *panics.Error with the re-raise's stack.
func TestRestartCarriedPanic(t *testing.T) {
	BackoffMin, BackoffMax = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { BackoffMin, BackoffMax = time.Second, time.Minute })
	var got []*Error
	var runs atomic.Int32
	Restart(context.Background(), func(context.Context) {
		if runs.Add(1) > 1 {
			return
		}
		carried := make(chan *Error)
		go func() {
			defer func() { carried <- New(recover()) }()
			panicInHelper()
		}()
		panic(<-carried)
	}, func(e *Error) { got = append(got, e) })
	if len(got) != 1 {
		t.Fatalf("%d panics reported, want 1", len(got))
	}
	if e := got[0]; e.Type != "string" || strings.Contains(e.Error(), "sk-live") || !strings.Contains(string(e.Stack), "panics.panicInHelper") {
		t.Errorf("reported %q with stack:\n%s", e.Error(), e.Stack)
	}
}

func panicInHelper() { panic(secret) }
