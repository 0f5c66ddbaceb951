//go:build !linux

package review

// walSpace preallocates the WAL on Linux only (wal_linux.go).
type walSpace struct{ path string }

func (w *walSpace) reserve(end int64) {}

func (w *walSpace) close() {}
