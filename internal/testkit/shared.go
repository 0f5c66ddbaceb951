package testkit

import (
	"os"
	"sync"
	"testing"
)

// sharedServer is a server all the tests of a binary share: the one the
// environment variable names, else the one start starts, once, the first
// time a test asks.
type sharedServer struct {
	once sync.Once
	addr string
	err  error
}

// get returns the server's address (a DSN or URL). A server that cannot be
// had fails the test: tests never skip for want of a server.
func (s *sharedServer) get(t testing.TB, what, env string, start func() (string, error)) string {
	t.Helper()
	s.once.Do(func() {
		if a := os.Getenv(env); a != "" {
			s.addr = a
			return
		}
		s.addr, s.err = start()
	})
	if s.err != nil {
		t.Fatalf("%s for tests: %v", what, s.err)
	}
	return s.addr
}
