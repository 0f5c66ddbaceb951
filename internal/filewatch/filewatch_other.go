//go:build !linux

package filewatch

import (
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Elsewhere the files are polled: a stat of each every PollInterval
// (following symlinks), a change of size, time or identity counts.
var PollInterval = time.Second

type impl struct {
	mu   sync.Mutex
	seen map[string]os.FileInfo
	quit chan struct{}
	done chan struct{}
}

func (w *Watcher) start() error {
	w.seen, w.quit, w.done = map[string]os.FileInfo{}, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		t := time.NewTicker(PollInterval)
		defer t.Stop()
		for {
			select {
			case <-w.quit:
				return
			case <-t.C:
				if w.poll() {
					w.signal()
				}
			}
		}
	}()
	return nil
}

func (w *Watcher) stop() error { close(w.quit); <-w.done; return nil }

func (w *Watcher) Set(files []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]os.FileInfo{}
	for dir, ns := range names(files) {
		for base := range ns {
			p := filepath.Join(dir, base)
			seen[p], _ = os.Stat(p)
		}
	}
	w.seen = seen
}

func (w *Watcher) poll() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := false
	for p, old := range w.seen {
		w.Events.Add(1)
		st, _ := os.Stat(p)
		if !same(old, st) {
			changed = true
		}
		w.seen[p] = st
	}
	return changed
}

func same(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
