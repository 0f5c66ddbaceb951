package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A disk that fills up cuts an audit line short: write(2) writes what
// fits and fails with ENOSPC (here the process's RLIMIT_FSIZE stands for
// the full disk: it cuts the write the same way, with EFBIG, and needs no
// root). That request is answered without its line and counted. Once
// space is back, the next line must be whole and readable, and so must the
// first line of a contractd started later on a file a crash left torn.
// Before, the next line was appended to the part without a newline: a
// request answered and audited normally (nothing logged, nothing counted)
// had an unreadable line, both after the disk was freed and after a
// restart (checked on a 2 MB tmpfs filled with dd: the same glued line).
func TestAuditLineAfterFullDiskIsWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	cfg, d := serveAudit(t, dir, "sink: file\n  path: audit.jsonl\n  include_content: true")

	size := func() int64 {
		t.Helper()
		fi, err := os.Stat(auditPath)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// fileSizeLimit sets the daemon's soft limit on the size of a file it
	// writes (RLIMIT_FSIZE) to cur, at most its hard limit, which stays.
	fileSizeLimit := func(cur uint64) {
		t.Helper()
		var lim unix.Rlimit
		if err := unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_FSIZE, nil, &lim); err != nil {
			t.Fatal(err)
		}
		lim.Cur = min(cur, lim.Max)
		if err := unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
			t.Fatal(err)
		}
	}
	// fill leaves room for 100 bytes more in the file: the next line is cut.
	fill := func() {
		t.Helper()
		fileSizeLimit(uint64(size() + 100))
		before := size()
		postOK(t, d, "The disk is full now.")
		if got := size(); got != before+100 {
			t.Fatalf("audit file %d bytes after the cut write, want %d: no torn line to test with", got, before+100)
		}
	}
	free := func() {
		t.Helper()
		fileSizeLimit(unix.RLIM_INFINITY)
	}
	lineOf := func(id string) map[string]any {
		t.Helper()
		for _, l := range strings.Split(readFile(t, auditPath), "\n") {
			if !strings.Contains(l, id) {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("the audit line of %s is not readable (%v): %.300q", id, err, l)
			}
			if m["request_id"] != id {
				t.Fatalf("the line holding %s is another request's: %v", id, m["request_id"])
			}
			return m
		}
		t.Fatalf("no audit line holds %s", id)
		return nil
	}

	lineOf(postOK(t, d, "The disk has room."))
	fill()
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 1 {
		t.Errorf("contractd_audit_write_errors_total after the cut line: %d, want 1", n)
	}
	if _, found := d.logLine(5*time.Second, msgIs("audit write failed")); !found {
		t.Error("no 'audit write failed' line for the cut write")
	}
	free()
	lineOf(postOK(t, d, "Space is back."))

	// A crash with a torn line at the file's end (cut again, then kill -9):
	// the next contractd's first line starts on a line of its own.
	fill()
	_ = d.cmd.Process.Kill()
	<-d.done
	d = startDaemon(t, cfg, baseEnv())
	lineOf(postOK(t, d, "A new process on the torn file."))
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 0 {
		t.Errorf("contractd_audit_write_errors_total of the new process: %d, want 0", n)
	}
}
