package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
)

const upbodyReply = `{"choices":[{"message":{"content":"{}"},"finish_reason":"stop"}]}`

// lateReader is a transport that answers at once and reads the request
// body only after RoundTrip has returned, as a transport may: the pooled
// body must still hold the bytes the attempt built then.
type lateReader struct {
	wg   sync.WaitGroup
	got  chan []byte
	read chan struct{} // closed: read the body now
}

func (t *lateReader) RoundTrip(r *http.Request) (*http.Response, error) {
	t.wg.Go(func() {
		<-t.read
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		t.got <- b
	})
	return &http.Response{StatusCode: 200, Header: http.Header{}, ContentLength: int64(len(upbodyReply)), Body: io.NopCloser(strings.NewReader(upbodyReply)), Request: r}, nil
}

// TestUpstreamBodyOutlivesTheCall: the attempt lets go of its body when
// the call returns; the buffer is reused only once the transport has closed
// its reader too (run with -race: a reuse before would be a race and
// corrupt what the transport reads).
func TestUpstreamBodyOutlivesTheCall(t *testing.T) {
	tr := &lateReader{got: make(chan []byte, 1), read: make(chan struct{})}
	c := &Caller{Client: &http.Client{Transport: tr}, Keys: testKeys}
	u := &config.Upstream{Name: "u", BaseURL: "http://up.invalid/v1", Timeout: time.Second}
	body := newUpstreamBody()
	body.b = append(body.b, `{"model":"m","messages":[]}`...)
	if _, err := c.call(context.Background(), u, body, nil); err != nil {
		t.Fatal(err)
	}
	body.done()
	if n := body.refs.Load(); n != 1 {
		t.Fatalf("refs %d after the call, want 1 (the transport's unclosed reader)", n)
	}
	// Other attempts take and fill pooled bodies meanwhile.
	for range 8 {
		o := newUpstreamBody()
		o.b = append(o.b, "overwritten"...)
		o.done()
	}
	close(tr.read)
	if got := <-tr.got; string(got) != `{"model":"m","messages":[]}` {
		t.Fatalf("the transport read %q", got)
	}
	tr.wg.Wait()
	if n := body.refs.Load(); n != 0 {
		t.Fatalf("refs %d after the transport closed its reader, want 0", n)
	}
}

// TestUpstreamBodyRedirect: a 307 makes the client read the body again
// through GetBody; both requests carry the same bytes, and every reader is
// counted and closed.
func TestUpstreamBodyRedirect(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if r.URL.Path == "/v1/chat/completions" {
			http.Redirect(w, r, "/v2/chat/completions", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, upbodyReply)
	}))
	defer srv.Close()
	c := NewCaller(testKeys)
	defer c.Client.CloseIdleConnections()
	u := &config.Upstream{Name: "u", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second}
	want := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	body := newUpstreamBody()
	body.b = append(body.b, want...)
	comp, err := c.call(context.Background(), u, body, nil)
	if err != nil || comp.Output != "{}" {
		t.Fatalf("%v %+v", err, comp)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || bodies[0] != want || bodies[1] != want {
		t.Fatalf("upstream read %q", bodies)
	}
	body.done()
	deadline := time.Now().Add(5 * time.Second)
	for body.refs.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the transport closes bodies on its own goroutine
	}
	if n := body.refs.Load(); n != 0 {
		t.Fatalf("refs %d, want 0: a reader was never closed", n)
	}
}

// TestCallFixedBody: Call's caller-owned bytes are sent as given and never
// pooled.
func TestCallFixedBody(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, upbodyReply)
	}))
	defer srv.Close()
	c := NewCaller(testKeys)
	defer c.Client.CloseIdleConnections()
	b := []byte(`{"model":"m"}`)
	if _, err := c.Call(context.Background(), &config.Upstream{Name: "u", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second}, b, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b) || string(b) != `{"model":"m"}` {
		t.Fatalf("sent %q, caller's bytes now %q", got, b)
	}
}
