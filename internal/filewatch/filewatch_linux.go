package filewatch

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// On a directory: names appearing, disappearing or moving, and the
	// directory itself removed or moved (its path then names another
	// directory, or none). Not IN_MODIFY: writes to other files in it are
	// no concern of ours.
	dirMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	// On a watched file (through symlinks): its content or the inode
	// going away (the last link removed, or the file moved).
	fileMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

type impl struct {
	f *os.File // the inotify descriptor, non-blocking (the runtime poller reads it)

	mu    sync.Mutex
	dirs  map[string]map[string]bool // directory -> watched names
	dirWD map[int32]string           // directory watches
	wdOf  map[string]int32           // directory -> its current watch
	// Each watched directory is also watched for by name from above: in
	// its parent (a directory symlink swapped, `current -> releases/N`, or
	// the directory removed, moved or created again), or, when it does
	// not exist (yet), in its nearest existing ancestor for the missing
	// child on the way down. Watch -> names.
	above map[int32]map[string]bool
	files map[string]int32 // watched path -> its file watch
	fileW map[int32]int    // file watch -> how many paths use it
	done  chan struct{}
}

func (w *Watcher) start() error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return os.NewSyscallError("inotify_init1", err)
	}
	w.f = os.NewFile(uintptr(fd), "inotify")
	w.dirs, w.dirWD, w.wdOf, w.files, w.fileW = map[string]map[string]bool{}, map[int32]string{}, map[string]int32{}, map[string]int32{}, map[int32]int{}
	w.above = map[int32]map[string]bool{}
	w.done = make(chan struct{})
	go w.read()
	return nil
}

func (w *Watcher) stop() error {
	err := w.f.Close()
	<-w.done
	return err
}

// Set replaces the watched files. Directories no longer needed keep their
// watch with no names, so a change racing a reload is never lost.
func (w *Watcher) Set(files []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := names(files)
	for dir := range w.dirs {
		if next[dir] == nil {
			next[dir] = map[string]bool{}
		}
	}
	w.dirs = next
	for path := range w.files {
		if !w.watchedLocked(path) {
			w.unwatchLocked(path)
		}
	}
	w.rearmLocked()
}

func (w *Watcher) fd() int { return int(w.f.Fd()) }

func (w *Watcher) watchedLocked(path string) bool {
	return w.dirs[filepath.Dir(path)][filepath.Base(path)]
}

// rearmLocked (re)adds the watch of every watched directory and path, so
// each follows the inode its path names now: a directory removed and
// created again, or one that did not exist before; a file after a rename
// over it or a symlink swap (the old inode's watch is dropped). A path
// that does not exist yet has none; its directory's watch sees it appear,
// and a directory that does not exist yet is watched for through its
// nearest existing ancestor.
func (w *Watcher) rearmLocked() {
	clear(w.above)
	for dir, ns := range w.dirs {
		if wd, err := unix.InotifyAddWatch(w.fd(), dir, dirMask); err == nil {
			if old, ok := w.wdOf[dir]; ok && old != int32(wd) && w.dirWD[old] == dir {
				delete(w.dirWD, old) // the directory it named is gone
			}
			w.wdOf[dir], w.dirWD[int32(wd)] = int32(wd), dir
		}
		if len(ns) == 0 {
			continue // kept only so a change racing a reload is not lost
		}
		for child, up := dir, filepath.Dir(dir); up != child; child, up = up, filepath.Dir(up) {
			if wd, err := unix.InotifyAddWatch(w.fd(), up, dirMask); err == nil {
				if w.above[int32(wd)] == nil {
					w.above[int32(wd)] = map[string]bool{}
				}
				w.above[int32(wd)][filepath.Base(child)] = true
				break
			}
		}
	}
	for dir, ns := range w.dirs {
		for base := range ns {
			path := filepath.Join(dir, base)
			wd, err := unix.InotifyAddWatch(w.fd(), path, fileMask)
			if err != nil {
				w.unwatchLocked(path)
				continue
			}
			if old, ok := w.files[path]; ok && old == int32(wd) {
				continue
			}
			w.unwatchLocked(path)
			w.files[path] = int32(wd)
			w.fileW[int32(wd)]++
		}
	}
}

func (w *Watcher) unwatchLocked(path string) {
	wd, ok := w.files[path]
	if !ok {
		return
	}
	delete(w.files, path)
	if w.fileW[wd]--; w.fileW[wd] <= 0 {
		delete(w.fileW, wd)
		_, _ = unix.InotifyRmWatch(w.fd(), uint32(wd)) // already gone when the inode was
	}
}

func (w *Watcher) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		changed := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.Events.Add(1)
			if w.concernsEvent(ev, string(bytes.TrimRight(name, "\x00"))) {
				changed = true
			}
		}
		if changed {
			w.mu.Lock()
			w.rearmLocked()
			w.mu.Unlock()
			w.signal()
		}
	}
}

func (w *Watcher) concernsEvent(ev *unix.InotifyEvent, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
		return true // events were lost: assume the worst
	}
	if name != "" && w.above[ev.Wd][name] {
		return true // a watched directory, or one on the way to it, came, went or was swapped
	}
	if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		// A watched directory (or the one watched above it) removed or
		// moved away: what its path names changes.
		if dir, ok := w.dirWD[ev.Wd]; ok && w.wdOf[dir] == ev.Wd {
			return len(w.dirs[dir]) > 0
		}
		if _, ok := w.above[ev.Wd]; ok {
			return true
		}
	}
	if dir, ok := w.dirWD[ev.Wd]; ok && name != "" {
		return concerns(w.dirs[dir], name)
	}
	if ev.Mask&unix.IN_IGNORED != 0 {
		return false // a file watch went away; its DELETE_SELF came first
	}
	_, ok := w.fileW[ev.Wd]
	return ok
}
