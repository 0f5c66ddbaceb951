// Package filewatch tells when any of a set of files changes, however it is
// changed: written in place, replaced by an atomic rename, removed and
// created again by an editor, or swapped in through a symlink (Kubernetes
// mounts a ConfigMap as name -> ..data/name with ..data a symlink that is
// renamed to a new timestamped directory on every update), its directory
// removed or moved and created again, or its directory a symlink that a
// release swaps (current -> releases/N). Each directory is also watched for
// by name in its parent, and one that does not exist yet in its nearest
// existing ancestor, so a file set to be watched before its directory is
// created is seen when it appears.
//
// Nothing else in the files' directories costs it anything: on Linux it
// asks inotify for name changes only (create, delete, rename) on each
// directory and for content changes on the watched files themselves, so a
// log or audit file written beside a config never wakes it up. Creating
// unrelated files does reach it, and is dropped by name before any work.
package filewatch

import (
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Watcher reports changes of its files on C, coalesced: one pending signal
// stands for any number of changes since the last receive.
type Watcher struct {
	// C receives a value after a change of a watched file.
	C <-chan struct{}
	c chan struct{}

	// Events counts the file system events read; Changes those that
	// concerned a watched file (tests read them: an unrelated file's
	// writes must not count at all, its creation only in Events).
	Events, Changes atomic.Int64

	impl
}

// New watches files (paths as the config names them).
func New(files []string) (*Watcher, error) {
	c := make(chan struct{}, 1)
	w := &Watcher{C: c, c: c}
	if err := w.start(); err != nil {
		return nil, err
	}
	w.Set(files)
	return w, nil
}

func (w *Watcher) signal() {
	w.Changes.Add(1)
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Close stops watching; C is not closed.
func (w *Watcher) Close() error { return w.stop() }

// names maps each directory to the base names watched in it.
func names(files []string) map[string]map[string]bool {
	m := map[string]map[string]bool{}
	for _, f := range files {
		f = filepath.Clean(f)
		dir, base := filepath.Dir(f), filepath.Base(f)
		if m[dir] == nil {
			m[dir] = map[string]bool{}
		}
		m[dir][base] = true
	}
	return m
}

// concerns says whether a name event in a directory that holds watched
// names can change one of them: the name itself, or a Kubernetes
// "..data"-style link the watched names resolve through.
func concerns(watched map[string]bool, name string) bool {
	return watched[name] || (len(watched) > 0 && strings.HasPrefix(name, ".."))
}
