package e2e

import (
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
	ok := func(text string) string {
		t.Helper()
		resp, body := post(t, d, reviewBody("review-sentiment", text))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		return resp.Header.Get("X-Request-Id")
	}
	holds := func(path, id string) bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), id)
	}
	reload := func() {
		t.Helper()
		if !d.sighup(10*time.Second, msgIs("config reloaded")) {
			t.Fatal("SIGHUP: no 'config reloaded'")
		}
	}

	first := ok("Before the rotation.")
	if err := os.Rename(auditPath, auditPath+".1"); err != nil {
		t.Fatal(err)
	}
	moved := ok("Between the move and the reload.")
	reload()
	after := ok("After the rotation.")
	if !holds(auditPath+".1", first) || !holds(auditPath+".1", moved) {
		t.Errorf("the moved file lacks the lines written before the reload:\n%s", readFile(t, auditPath+".1"))
	}
	if !holds(auditPath, after) {
		t.Fatalf("no line of %s at audit.path after the rotation and SIGHUP", after)
	}
	if holds(auditPath+".1", after) {
		t.Error("the line after the reload went to the moved file")
	}
	if _, found := d.logLine(5*time.Second, msgIs("audit sink opened")); !found {
		t.Error("no 'audit sink opened' line")
	}

	if err := os.Remove(auditPath); err != nil {
		t.Fatal(err)
	}
	reload()
	if id := ok("After the removal."); !holds(auditPath, id) {
		t.Fatalf("no line of %s at audit.path after its removal and SIGHUP", id)
	}
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 0 {
		t.Errorf("contractd_audit_write_errors_total: %d, want 0", n)
	}
}
