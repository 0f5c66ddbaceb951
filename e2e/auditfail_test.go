package e2e

import (
	"testing"
	"time"
)

// An audit line that cannot be written (the disk full: here the sink's
// file is /dev/full, every write ENOSPC) does not stop the request, which
// is answered without its line and logs "audit write failed" with its
// request_id, and is counted in contractd_audit_write_errors_total
// (present at 0 from the start), so an alert can see the accountable record
// going missing. Before, the log line was the only trace: no metric.
func TestAuditWriteFailureCounted(t *testing.T) {
	t.Parallel()
	_, d := serveAudit(t, t.TempDir(), "sink: file\n  path: /dev/full")
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 0 {
		t.Fatalf("contractd_audit_write_errors_total at start: %d, want 0 (-1: missing)", n)
	}
	id := needsReview(t, d, "The soup was cold and the disk was full.")
	if n := d.metricValue(t, "contractd_audit_write_errors_total"); n != 1 {
		t.Errorf("contractd_audit_write_errors_total after one request: %d, want 1", n)
	}
	l, ok := d.logLine(5*time.Second, msgIs("audit write failed"))
	if !ok || l["request_id"] != id || l["level"] != "ERROR" {
		t.Errorf("audit write failed line: %v (found %v), want request_id %s", l, ok, id)
	}
}
