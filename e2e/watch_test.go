package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reloadMetric is contractd_config_reloads_total by result.
func reloadMetric(t *testing.T, d *daemon) (success, failure int) {
	t.Helper()
	for _, l := range strings.Split(string(d.metrics(t)), "\n") {
		_, _ = fmt.Sscanf(l, `contractd_config_reloads_total{result="success"} %d`, &success)
		_, _ = fmt.Sscanf(l, `contractd_config_reloads_total{result="failure"} %d`, &failure)
	}
	return success, failure
}

func isReload(m map[string]any) bool {
	s, _ := m["msg"].(string)
	return strings.HasPrefix(s, "config reload")
}

// TestReloadWatchesOnlyItsFiles: a thousand other files written in the
// config's directory, and an audit file there written on every request,
// make no reload attempt; a reload applies a new audit sink and path and a
// new log level without a restart.
func TestReloadWatchesOnlyItsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	up, d := serveBase(t, dir)
	assertServes(t, d, "review-sentiment", goodContent)

	for i := range 1000 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("unrelated-%04d.json", i)), `{"n":1}`)
	}
	time.Sleep(time.Second) // past the watch's debounce
	if ok, bad := reloadMetric(t, d); d.countLog(isReload) != 0 || ok+bad != 0 {
		t.Fatalf("unrelated files: %d reload log lines, %d+%d reloads counted", d.countLog(isReload), ok, bad)
	}

	// Audit to a file beside the config, and log warnings only.
	auditPath := filepath.Join(dir, "audit.jsonl")
	next := renderConfig(cfgOpts{upstream: up.URL(), server: "  log_level: warn\n", audit: "sink: file\n  path: audit.jsonl"})
	writeConfig(t, dir, next)
	if _, ok := d.logLine(reloadWindow+time.Second, reloaded("file")); !ok {
		t.Fatal("no reload after the config changed")
	}
	stdoutBefore, requestsBefore := len(d.stdout.Lines()), d.countLog(msgIs("request"))
	for range 20 {
		assertServes(t, d, "review-sentiment", goodContent)
	}
	time.Sleep(time.Second)
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatalf("no audit file after the reload: %v", err)
	}
	if n := strings.Count(string(b), `"event":"request"`); n != 20 {
		t.Errorf("%d request lines in the new audit file, want 20", n)
	}
	if n := len(d.stdout.Lines()); n != stdoutBefore {
		t.Errorf("%d audit lines still went to stdout", n-stdoutBefore)
	}
	if n := d.countLog(msgIs("request")); n != requestsBefore {
		t.Errorf("%d info request lines logged at log_level warn", n-requestsBefore)
	}
	if n := d.countLog(isReload); n != 1 {
		t.Errorf("%d reload log lines, want 1 (audit writes beside the config reloaded it?)", n)
	}
	if ok, bad := reloadMetric(t, d); ok != 1 || bad != 0 {
		t.Errorf("%d successful and %d failed reloads counted, want one success", ok, bad)
	}
}
