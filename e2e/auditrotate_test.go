package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Rotation by rename (logrotate's default, create): the audit file is
// moved away and serve gets SIGHUP; the next lines go to a new file at
// audit.path, none lost. The same after the file is removed. Before, a
// reload reopened the sink only when the config named another one: lines
// kept going to the moved file, and after a removal to an unlinked inode,
// until a restart (nothing logged or counted).
func TestAuditReopenedAfterRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	_, d := serveAudit(t, dir, "sink: file\n  path: audit.jsonl")
	reload := func() {
		t.Helper()
		if !d.sighup(10*time.Second, msgIs("config reloaded")) {
			t.Fatal("SIGHUP: no 'config reloaded'")
		}
	}

	first := postOK(t, d, "Before the rotation.")
	if err := os.Rename(auditPath, auditPath+".1"); err != nil {
		t.Fatal(err)
	}
	moved := postOK(t, d, "Between the move and the reload.")
	reload()
	after := postOK(t, d, "After the rotation.")
	if !fileHolds(auditPath+".1", first) || !fileHolds(auditPath+".1", moved) {
		t.Errorf("the moved file lacks the lines written before the reload:\n%s", readFile(t, auditPath+".1"))
	}
	if !fileHolds(auditPath, after) {
		t.Fatalf("no line of %s at audit.path after the rotation and SIGHUP", after)
	}
	if fileHolds(auditPath+".1", after) {
		t.Error("the line after the reload went to the moved file")
	}
	if _, found := d.logLine(5*time.Second, msgIs("audit sink opened")); !found {
		t.Error("no 'audit sink opened' line")
	}

	if err := os.Remove(auditPath); err != nil {
		t.Fatal(err)
	}
	reload()
	if id := postOK(t, d, "After the removal."); !fileHolds(auditPath, id) {
		t.Fatalf("no line of %s at audit.path after its removal and SIGHUP", id)
	}
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 0 {
		t.Errorf("contractd_audit_write_errors_total: %d, want 0", n)
	}
}

// Moved or removed without a reload (logrotate without postrotate, an
// operator's mv or rm): serve notices within about a second that
// audit.path no longer names the file it writes and opens a new one there,
// logging 'audit sink opened'; the lines written meanwhile are whole in
// the moved file. Before, the lines went on to the moved file, or to an
// unlinked inode after a removal, until a reload or restart, with nothing
// logged or counted.
func TestAuditFollowsMoveWithoutReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	_, d := serveAudit(t, dir, "sink: file\n  path: audit.jsonl")
	// followed sends requests until one's line is at audit.path (at most
	// 10 s) and returns the ids of those whose lines are not.
	followed := func(what string) []string {
		t.Helper()
		var before []string
		end := time.Now().Add(10 * time.Second)
		for {
			id := postOK(t, d, what)
			if fileHolds(auditPath, id) {
				return before
			}
			before = append(before, id)
			if time.Now().After(end) {
				t.Fatalf("%s: no line at audit.path after 10 s without a reload", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	opened := msgIs("audit sink opened")

	first := postOK(t, d, "Before the move.")
	if err := os.Rename(auditPath, auditPath+".1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(followed("After the move."), first) {
		if !fileHolds(auditPath+".1", id) {
			t.Errorf("line of %s neither at audit.path nor in the moved file", id)
		}
	}
	// The line is logged just after the new file is opened, so a request
	// can reach the file first.
	waitFor(5*time.Second, func() bool { return d.countLog(opened) >= 1 })
	if n := d.countLog(opened); n != 1 {
		t.Errorf("%d 'audit sink opened' lines after the move, want 1", n)
	}
	if err := os.Remove(auditPath); err != nil {
		t.Fatal(err)
	}
	followed("After the removal.")
	waitFor(5*time.Second, func() bool { return d.countLog(opened) >= 2 })
	if n := d.countLog(opened); n != 2 {
		t.Errorf("%d 'audit sink opened' lines after the removal, want 2", n)
	}
	if d.countLog(msgIs("config reloaded")) != 0 {
		t.Error("a reload ran; the test is of a move without one")
	}
	for _, p := range []string{auditPath, auditPath + ".1"} {
		for i, line := range strings.Split(strings.TrimSuffix(readFile(t, p), "\n"), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("%s line %d is not whole JSON: %q", p, i+1, line)
			}
		}
	}
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 0 {
		t.Errorf("contractd_audit_write_errors_total: %d, want 0", n)
	}
}
