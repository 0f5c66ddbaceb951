package proxy

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
)

// pieces hands out s in reads of at most n bytes.
type pieces struct {
	s string
	n int
}

func (p *pieces) Read(b []byte) (int, error) {
	if p.s == "" {
		return 0, io.EOF
	}
	k := min(len(b), p.n, len(p.s))
	copy(b, p.s[:k])
	p.s = p.s[k:]
	return k, nil
}

// boundaries are the offsets in s where a relay may end a read: after a
// blank line, and after a comment line outside an event (worked out line
// by line, apart from the relay's byte scanner).
func boundaries(s string) map[int]bool {
	out := map[int]bool{}
	inEvent := false
	for off := 0; off < len(s); {
		end := strings.IndexAny(s[off:], "\r\n")
		if end < 0 {
			break
		}
		line, next := s[off:off+end], off+end+1
		if s[off+end] == '\r' && next < len(s) && s[next] == '\n' {
			next++
		}
		// A \r ends a line (SSE): the relay may hand on a \r\n's \r
		// before its \n comes.
		switch {
		case line == "":
			out[off+end+1], out[next], inEvent = true, true, false
		case line[0] == ':':
			if !inEvent {
				out[off+end+1], out[next] = true, true
			}
		default:
			inEvent = true
		}
		off = next
	}
	return out
}

// A well-formed stream goes through the relay byte for byte, however the
// upstream's reads split it, and every read the proxy gets ends where an
// event (or a comment outside one) ends.
func TestSSERelayWholeEvents(t *testing.T) {
	streams := map[string]struct {
		s    string
		chat bool
	}{
		"chat LF":                      {"data: {\"a\":1}\n\n: ping\n\ndata: {\"b\":\n" + "data: 2}\n\ndata: [DONE]\n\n", true},
		"chat CRLF":                    {": hi\r\n\r\ndata: {\"a\":1}\r\n\r\ndata: [DONE]\r\n\r\n", true},
		"chat CR":                      {"data: {\"a\":1}\r\rdata:[DONE]\r\r", true},
		"comment lines between events": {":a\n:b\ndata: x\n\n:c\ndata: [DONE]\n\n", true},
		"responses": {"event: response.created\ndata: {}\n\nevent: response.output_text.delta\ndata: {\"delta\":\"x\"}\n\n" +
			"event: response.completed\ndata: {\"response\":{}}\n\n", false},
	}
	for name, tc := range streams {
		bounds := boundaries(tc.s)
		for n := 1; n <= len(tc.s); n++ {
			c := &passCall{Context: context.Background(), clientCtx: context.Background()}
			r := &sseRelay{body: io.NopCloser(&pieces{tc.s, n}), call: c, chat: tc.chat}
			var got strings.Builder
			buf := make([]byte, 7)
			for {
				k, err := r.Read(buf)
				got.Write(buf[:k])
				if k > 0 && k == len(buf) {
					continue // the proxy's buffer was full: more of the same read follows
				}
				if k > 0 && !bounds[got.Len()] {
					t.Fatalf("%s, reads of %d: a read ended at %d, inside an event: %q", name, n, got.Len(), got.String())
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s, reads of %d: %v", name, n, err)
				}
			}
			if got.String() != tc.s {
				t.Fatalf("%s, reads of %d: relayed %q, want %q", name, n, got.String(), tc.s)
			}
			if c.broken != nil {
				t.Fatalf("%s, reads of %d: broken %v", name, n, c.broken)
			}
		}
	}
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "Text/Event-Stream": true, "text/event-stream; charset=utf-8": true,
		" text/event-stream ;charset=utf-8": true, "text/event-streams": false, "application/json": false,
		"": false, "text/event": false, "text/event-stream-x": false,
	} {
		if got := isEventStream(ct); got != want {
			t.Errorf("isEventStream(%q) = %v", ct, got)
		}
	}
}

// Any upstream stream, however split and wherever it ends: the relay
// terminates, and a stream it reports broken reaches the client as whole
// events of the upstream's (a prefix of its bytes ending where an event
// ends) followed by exactly one error event.
func FuzzSSERelay(f *testing.F) {
	for _, s := range []string{"data: {\"a\":1}\n\ndata: [DONE]\n\n", "data: {\"a\":1}\n\ndata: {\"b\"", ": x\r\n\r\ndata: 1\r\n\r\ndata: 2\r",
		"event: response.created\ndata: {}\n\nevent: response.completed\ndata: {", "data: [DONE]", "\n\n\r\r:\n"} {
		f.Add(s, uint8(3), true)
		f.Add(s, uint8(1), false)
	}
	f.Fuzz(func(t *testing.T, s string, n uint8, chat bool) {
		x := &exchange{s: &Server{Logger: slog.New(slog.DiscardHandler)}, ev: &audit.Event{}, edge: responsesEdge}
		if chat {
			x.edge = chatEdge
		}
		c := &passCall{Context: context.Background(), clientCtx: context.Background(), x: x,
			route: &config.Route{Upstream: &config.Upstream{Name: "up"}}}
		r := newSSERelay(io.NopCloser(&pieces{s, int(n%64) + 1}), c)
		var got strings.Builder
		buf := make([]byte, 512)
		var err error
		for i := 0; ; i++ {
			if i > 4*len(s)+16 {
				t.Fatalf("no end after %d reads", i)
			}
			var k int
			k, err = r.Read(buf)
			got.Write(buf[:k])
			if err != nil {
				break
			}
		}
		r.Close()
		if c.broken == nil || err != io.EOF {
			return
		}
		out := got.String()
		i := strings.LastIndex(out, "data: {")
		if !chat {
			i = strings.LastIndex(out, "event: error\n")
		}
		if i < 0 || !strings.Contains(out[i:], `"code":"upstream_error"`) || !strings.HasSuffix(out, "}\n\n") {
			t.Fatalf("broken stream %q relayed as %q: no error event at its end", s, out)
		}
		if prefix := out[:i]; !strings.HasPrefix(s, prefix) || (prefix != "" && !boundaries(s)[len(prefix)]) {
			t.Fatalf("broken stream %q relayed as %q: %q is not whole events of it", s, out, prefix)
		}
	})
}
