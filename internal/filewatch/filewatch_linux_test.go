package filewatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLogBesideConfigCostsNothing: appending to a file beside the config
// (a log, an audit file) does not even wake the watcher: inotify is not
// asked for writes to other files.
func TestLogBesideConfigCostsNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "contractd.yaml")
	write(t, cfg, "v: 1\n")
	log, err := os.OpenFile(filepath.Join(dir, "audit.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	must(t, err)
	defer log.Close()
	w, err := New([]string{cfg})
	must(t, err)
	defer w.Close()
	for range 1000 {
		_, _ = log.WriteString(`{"event":"request"}` + "\n")
	}
	must(t, log.Sync())
	time.Sleep(200 * time.Millisecond)
	if n := w.Events.Load(); n != 0 {
		t.Fatalf("%d inotify events read for appends to another file, want 0", n)
	}
}
