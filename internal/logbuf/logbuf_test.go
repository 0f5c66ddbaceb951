package logbuf

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// sink records each write it gets as one chunk.
type sink struct {
	mu     sync.Mutex
	writes []string
	err    error
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	s.writes = append(s.writes, string(p))
	return len(p), nil
}

func (s *sink) chunks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

func TestWriter(t *testing.T) {
	big := strings.Repeat("x", size) + "\n"
	for _, tt := range []struct {
		name  string
		run   func(w *Writer)
		want  []string // the writes the sink got, in order
		after []string // what it has after Close (nil: same as want)
	}{
		{"held until flushed", func(w *Writer) {
			w.Write([]byte("a\n"))
			w.Write([]byte("b\n"))
		}, nil, []string{"a\nb\n"}},
		{"Flush writes what is held in one write", func(w *Writer) {
			w.Write([]byte("a\n"))
			w.Write([]byte("b\n"))
			w.Flush()
		}, []string{"a\nb\n"}, nil},
		{"a full buffer is written first", func(w *Writer) {
			w.Write([]byte(strings.Repeat("y", size-1)))
			w.Write([]byte("zz"))
		}, []string{strings.Repeat("y", size-1)}, []string{strings.Repeat("y", size-1), "zz"}},
		{"a line larger than the buffer goes through, in order", func(w *Writer) {
			w.Write([]byte("a\n"))
			w.Write([]byte(big))
		}, []string{"a\n", big}, nil},
		{"after Close writes go through", func(w *Writer) {
			w.Write([]byte("a\n"))
			w.Close()
			w.Write([]byte("late\n"))
		}, []string{"a\n", "late\n"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &sink{}
			w := New(s, time.Hour) // no timer flush during the case
			tt.run(w)
			if got := s.chunks(); !equal(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
			after := tt.after
			if after == nil {
				after = tt.want
			}
			w.Close()
			if got := s.chunks(); !equal(got, after) {
				t.Errorf("after Close: writes %q, want %q", got, after)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Lines held are written within the interval without a Flush, several in
// one write.
func TestWriterFlushesOnInterval(t *testing.T) {
	s := &sink{}
	w := New(s, 20*time.Millisecond)
	defer w.Close()
	w.Write([]byte("a\n"))
	w.Write([]byte("b\n"))
	deadline := time.Now().Add(5 * time.Second)
	for len(s.chunks()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing written within 5 s of a 20 ms interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.chunks(); !equal(got, []string{"a\nb\n"}) {
		t.Fatalf("writes %q, want one write of both lines", got)
	}
	// The interval starts again with the next line.
	w.Write([]byte("c\n"))
	for len(s.chunks()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("second line not written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.chunks()[1]; got != "c\n" {
		t.Fatalf("second write %q", got)
	}
}

// A failed write to the underlying writer is reported by the next Write.
func TestWriterReportsWriteError(t *testing.T) {
	boom := errors.New("disk gone")
	s := &sink{err: boom}
	w := New(s, 5*time.Millisecond)
	defer w.Close()
	w.Write([]byte("a\n"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := w.Write([]byte("b\n"))
		if errors.Is(err, boom) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the failed flush was never reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Concurrent writers: every line arrives whole and once.
func TestWriterConcurrent(t *testing.T) {
	s := &sink{}
	w := New(s, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				fmt.Fprintf(w, "g%d line %d\n", g, i)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(s.chunks(), "")
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(all, "\n"), "\n") {
		if seen[l] {
			t.Fatalf("line %q twice", l)
		}
		seen[l] = true
	}
	if len(seen) != 8*500 {
		t.Fatalf("%d lines, want %d", len(seen), 8*500)
	}
	if bytes.Count([]byte(all), []byte("\n")) != 8*500 {
		t.Fatal("lines torn")
	}
}
