package h1

import (
	"net"
	"syscall"
	"unsafe"
)

// liveness tells whether an idle connection is still usable without a
// goroutine reading it in the background (net/http's Transport keeps one
// per connection): a non-blocking peek at the socket when it is taken from
// the pool. End of file (the upstream closed it while idle), an error, or
// bytes nobody asked for all mean it is not.
type liveness struct {
	rc   syscall.RawConn
	ok   bool
	peek func(fd uintptr) bool // made once: a method value allocates
}

func newLiveness(nc net.Conn) liveness {
	var l liveness
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			l.rc = rc
		}
	}
	return l
}

func (l *liveness) alive() bool {
	if l.rc == nil {
		return true // not a socket (a test's pipe): the retry rule covers it
	}
	if l.peek == nil {
		l.peek = l.peekFD
	}
	if err := l.rc.Read(l.peek); err != nil {
		return false
	}
	return l.ok
}

// peekFD is RawConn.Read's callback; returning true means done, even on
// EAGAIN (a blocking wait is exactly what must not happen here).
func (l *liveness) peekFD(fd uintptr) bool {
	var b [1]byte
	// Raw: with MSG_DONTWAIT the call never blocks.
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	l.ok = errno == syscall.EAGAIN // nothing to read: open and quiet
	return true
}
