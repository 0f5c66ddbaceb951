package proxy

import (
	"net"
	"testing"
	"time"
)

// Open counts accepted connections: the slot an Accept reserves while it
// waits for a client is not one (contractd_connections_open read one too
// many whenever the server was waiting to accept).
func TestConnLimitOpenCountsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &ConnLimit{Max: func() int { return 2 }}
	ll := l.Listener(ln)
	defer ll.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ll.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	waitOpen := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); l.Open() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("Open() = %d, want %d", l.Open(), want)
			}
			time.Sleep(time.Millisecond)
		}
		// And it stays there while Accept waits for the next client.
		time.Sleep(20 * time.Millisecond)
		if got := l.Open(); got != want {
			t.Fatalf("Open() = %d after a wait, want %d", got, want)
		}
	}
	waitOpen(0) // Accept is waiting for a client
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	waitOpen(1)
	client.Close()
	server.Close()
	server.Close() // a second Close counts once
	waitOpen(0)
	ll.Close()
	for range accepted {
	}
}
