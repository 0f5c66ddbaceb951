package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/memlimit"
)

// server.memory_limit sets Go's soft memory limit in the serving process:
// a size as written, off as none, auto as 80 % of the cgroup limit (none
// without one); a reload applies a new value, and GOMEMLIMIT in the
// environment wins over the config.
func TestMemoryLimitApplied(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	dir := t.TempDir()
	with := func(v string) string {
		return renderConfig(cfgOpts{upstream: up.URL(), server: "  memory_limit: " + v + "\n"})
	}
	cfg := writeConfig(t, dir, with("256MiB"))
	d := startDaemon(t, cfg, baseEnv())
	if got := d.metricValue(t, "contractd_memory_limit_bytes"); got != 256<<20 {
		t.Fatalf("memory_limit 256MiB: the process reports %d", got)
	}
	auto := memlimit.Cgroup("/") / 10 * 8
	for _, tc := range []struct {
		value string
		want  int64
	}{{"off", 0}, {"auto", auto}, {"1.5GiB", 3 << 29}} {
		writeConfig(t, dir, with(tc.value))
		if !d.sighup(3*time.Second, reloaded("sighup")) {
			t.Fatalf("%s: no reload after SIGHUP", tc.value)
		}
		if got := d.metricValue(t, "contractd_memory_limit_bytes"); got != tc.want {
			t.Errorf("memory_limit %s after a reload: the process reports %d, want %d", tc.value, got, tc.want)
		}
	}

	env := baseEnv()
	env["GOMEMLIMIT"] = fmt.Sprint(100 << 20)
	d2 := startDaemon(t, writeConfig(t, t.TempDir(), with("256MiB")), env)
	if got := d2.metricValue(t, "contractd_memory_limit_bytes"); got != 100<<20 {
		t.Errorf("GOMEMLIMIT 100 MiB with memory_limit 256MiB: the process reports %d", got)
	}
}
