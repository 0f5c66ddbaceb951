package review

import (
	"os"

	"golang.org/x/sys/unix"
)

// walSpace keeps the blocks ahead of the WAL's write position allocated.
// A commit appending to the WAL into unallocated space reserves delayed
// allocation under the inode's i_data_sem (ext4), which the checkpoint's
// fsync holds while it allocates the blocks of the pages it writes back:
// commits beside a checkpoint waited 1-4 ms in pwrite for it
// (docs/benchmarks.md, session 7). Writing into allocated blocks takes no
// such lock.
type walSpace struct {
	path string
	f    *os.File // opened once the WAL exists; reopened if it was replaced
}

// Ahead and chunk of preallocation: allocate when the write position is
// within walAhead of the file's end, up to walChunk past the position. At
// 400 items/s the WAL grows about 24 MB/s; the checkpointer looks every
// 100 ms.
const (
	walAhead = 8 << 20
	walChunk = 16 << 20
)

// reserve makes sure [end, end+walChunk) is allocated when end is within
// walAhead of the file's size. Errors only cost the optimisation (a file
// system without fallocate, a file-size limit): SQLite writes either way.
func (w *walSpace) reserve(end int64) {
	if end <= 0 {
		return
	}
	var size int64
	if w.f != nil {
		// SQLite deletes the WAL when its last connection closes and
		// creates a new one on the next write.
		a, err := w.f.Stat()
		b, err2 := os.Stat(w.path)
		if err != nil || err2 != nil || !os.SameFile(a, b) {
			w.close()
		} else {
			size = a.Size()
		}
	}
	if w.f == nil {
		f, err := os.OpenFile(w.path, os.O_RDWR, 0) // never creates: that is SQLite's
		if err != nil {
			return
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return
		}
		w.f, size = f, fi.Size()
	}
	if end+walAhead <= size {
		return
	}
	// Mode 0 extends the file's size too, so an append changes no size
	// either (that update also takes i_data_sem). SQLite reads a WAL up to
	// its first invalid frame; zeroes are invalid.
	_ = unix.Fallocate(int(w.f.Fd()), 0, end, walChunk)
}

func (w *walSpace) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
