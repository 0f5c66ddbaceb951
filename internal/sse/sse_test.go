package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every event; err is the terminal error (io.EOF: clean end).
func readAll(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if len(evs) > 1<<16 {
			return evs, errors.New("too many events")
		}
	}
}

func data(ds ...string) []Event {
	evs := make([]Event, len(ds))
	for i, d := range ds {
		evs[i] = Event{Data: d, Retry: -1}
	}
	return evs
}

func TestReader(t *testing.T) {
	chunk := `{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}`
	tests := []struct {
		name string
		in   string
		want []Event
		err  error // terminal error, io.EOF when nil
	}{
		{"empty", "", nil, nil},
		{"openai stream", "data: " + chunk + "\n\ndata: [DONE]\n\n", data(chunk, Done), nil},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", data("a", "b"), nil},
		{"lone cr", "data: a\r\rdata: b\r\r", data("a", "b"), nil},
		{"mixed endings", "data: a\r\n\rdata: b\n\r\n", data("a", "b"), nil},
		{"multi-line data", "data: a\ndata: b\ndata:\ndata:  c\n\n", data("a\nb\n\n c"), nil},
		{"no space after colon", "data:x\n\n", data("x"), nil},
		{"only one space stripped", "data:  x \n\n", data(" x "), nil},
		{"empty data dispatches", "data\n\ndata:\n\n", data("", ""), nil},
		{"comments", ": keep-alive\n\n:another\ndata: a\n: inside\n\n", data("a"), nil},
		{"blank lines only", "\n\n\r\n\r", nil, nil},
		{"event without data is not dispatched", "event: ping\n\ndata: a\n\n", data("a"), nil},
		{"event type", "event: error\ndata: {}\n\n", []Event{{Type: "error", Data: "{}", Retry: -1}}, nil},
		{"type resets per event", "event: x\ndata: 1\n\ndata: 2\n\n", []Event{{Type: "x", Data: "1", Retry: -1}, {Data: "2", Retry: -1}}, nil},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
			[]Event{{ID: "7", Data: "a", Retry: -1}, {ID: "7", Data: "b", Retry: -1}, {Data: "c", Retry: -1}}, nil},
		{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
			[]Event{{ID: "1", Data: "a", Retry: -1}, {ID: "1", Data: "b", Retry: -1}}, nil},
		{"retry", "retry: 1500\ndata: a\n\nretry: 1x\ndata: b\n\n",
			[]Event{{Data: "a", Retry: 1500}, {Data: "b", Retry: 1500}}, nil},
		{"unknown field ignored", "foo: bar\ndata: a\n\n", data("a"), nil},
		{"field name is case-sensitive", "Data: a\ndata: b\n\n", data("b"), nil},
		{"unterminated last event dropped", "data: a\n\ndata: b\n", data("a"), nil},
		{"unterminated last line dropped", "data: a\n\ndata: b", data("a"), nil},
		{"bom", "\ufeffdata: a\n\n", data("a"), nil},
		{"second bom is data", "\ufeff\ufeffdata: a\n\n", nil, nil},
		{"done", "data: [DONE]\n\n", data(Done), nil},
		{"utf8 and invalid bytes kept", "data: é\xff\n\n", data("é\xff"), nil},
		{"colon in value", "data: a: b\n\n", data("a: b"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.err
			if want == nil {
				want = io.EOF
			}
			for _, mode := range []string{"whole", "one-byte", "half"} {
				var src io.Reader = strings.NewReader(tt.in)
				switch mode {
				case "one-byte":
					src = iotest.OneByteReader(src)
				case "half":
					src = iotest.HalfReader(src)
				}
				got, err := readAll(NewReader(src))
				if !errors.Is(err, want) {
					t.Fatalf("%s: error %v, want %v", mode, err, want)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("%s: events\n got %#v\nwant %#v", mode, got, tt.want)
				}
			}
		})
	}
}

func TestReaderBounds(t *testing.T) {
	r := NewReader(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	r.MaxLine = 50
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("error %v, want ErrLineTooLong", err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("error not sticky: %v", err)
	}

	// A line exactly MaxLine long is fine.
	r = NewReader(strings.NewReader("data: " + strings.Repeat("x", 44) + "\n\n"))
	r.MaxLine = 50
	if ev, err := r.Next(); err != nil || len(ev.Data) != 44 {
		t.Fatalf("%v %q", err, ev.Data)
	}

	// Many short data lines cannot grow an event past MaxEvent.
	r = NewReader(strings.NewReader(strings.Repeat("data: 0123456789\n", 100) + "\n"))
	r.MaxEvent = 500
	if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("error %v, want ErrEventTooLarge", err)
	}

	// An endless line without a terminator stops at the bound instead of
	// reading forever.
	r = NewReader(io.LimitReader(infinite('a'), 1<<30))
	r.MaxLine = 4096
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("error %v, want ErrLineTooLong", err)
	}
}

type infinite byte

func (b infinite) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// A reader error is returned as is.
func TestReaderError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	evs, err := readAll(r)
	if !errors.Is(err, boom) || !reflect.DeepEqual(evs, data("a")) {
		t.Fatalf("%v %#v", err, evs)
	}
}

// A lone "\r" ends the line at once: the reader must not wait for the next
// byte to know whether a "\n" follows (that would stall a live stream).
func TestReaderCRDoesNotBlock(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	r := NewReader(pr)
	got := make(chan Event, 1)
	go func() {
		ev, err := r.Next()
		if err == nil {
			got <- ev
		}
		close(got)
	}()
	if _, err := pw.Write([]byte("data: a\r\r")); err != nil {
		t.Fatal(err)
	}
	ev, ok := <-got
	if !ok || ev.Data != "a" {
		t.Fatalf("event %q %v", ev.Data, ok)
	}
}

// ------------------------------------------------------------------ fuzz

// reference is a direct transcription of the WHATWG event-stream
// interpretation over a fully buffered input, with the same bounds.
func reference(in []byte, maxLine, maxEvent int) ([]Event, error) {
	in = bytes.TrimPrefix(in, []byte("\ufeff"))
	var lines [][]byte
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			lines = append(lines, in) // unterminated last line
			break
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	var (
		evs     []Event
		buf     []string
		typ, id string
		retry   = -1
		size    int
	)
	for _, l := range lines {
		if len(l) > maxLine {
			return evs, ErrLineTooLong
		}
		if len(l) == 0 {
			if buf != nil {
				evs = append(evs, Event{Type: typ, Data: strings.Join(buf, "\n"), ID: id, Retry: retry})
			}
			buf, typ, size = nil, "", 0
			continue
		}
		if l[0] == ':' {
			continue
		}
		name, value, found := strings.Cut(string(l), ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			add := len(value)
			if buf != nil {
				add++
			}
			if size+add > maxEvent {
				return evs, ErrEventTooLarge
			}
			size += add
			buf = append(buf, value)
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		case "retry":
			if n, err := strconv.Atoi(value); err == nil && value != "" && strings.Trim(value, "0123456789") == "" && len(value) <= 9 {
				retry = n
			}
		}
	}
	return evs, io.EOF
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"", "data: [DONE]\n\n", "data: a\r\n\r\n", "data: a\r\rdata: b\r\r", ": c\n\ndata\n\n",
		"event: e\nid: 1\nretry: 10\ndata: x\ndata: y\n\n", "\ufeffdata: a\n\n", "data: a\n\ndata: b",
		"data: " + strings.Repeat("z", 80) + "\n\n", "id: a\x00b\ndata: 1\n\n", "\r\n\r\n\n\r",
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunking uint8) {
		const maxLine, maxEvent = 64, 256
		var src io.Reader = bytes.NewReader(in)
		switch chunking % 3 {
		case 1:
			src = iotest.OneByteReader(src)
		case 2:
			src = iotest.HalfReader(src)
		}
		r := NewReader(src)
		r.MaxLine, r.MaxEvent = maxLine, maxEvent
		got, err := readAll(r)
		want, wantErr := reference(in, maxLine, maxEvent)
		if !errors.Is(err, wantErr) {
			t.Fatalf("error %v, reference %v", err, wantErr)
		}
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("events\n got %#v\nwant %#v", got, want)
		}
		for _, ev := range got {
			if len(ev.Data) > maxEvent {
				t.Fatalf("event data %d bytes over the bound", len(ev.Data))
			}
		}
	})
}
