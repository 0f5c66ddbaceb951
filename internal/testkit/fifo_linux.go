package testkit

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// StuckFIFO makes a FIFO at path for a sink that must block: its reader
// is opened first (a writer's open of a FIFO waits for one), reads nothing
// until the test reads it, and its pipe holds one page, so a write of more
// than 4 KiB blocks. The reader is closed at cleanup.
func StuckFIFO(t testing.TB, path string) *os.File {
	t.Helper()
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := os.NewFile(uintptr(fd), path)
	t.Cleanup(func() { r.Close() })
	if _, err := unix.FcntlInt(r.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	return r
}
