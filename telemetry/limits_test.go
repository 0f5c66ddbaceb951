package telemetry_test

import (
	"strings"
	"testing"

	"github.com/contractd/contractd/telemetry"
)

// The limits are on /metrics, read from the stats at each scrape.
func TestLimitMetrics(t *testing.T) {
	tel := bareTelemetry(t)
	st := telemetry.LimitStats{Connections: 3, InflightBytes: 1 << 20, RefusedBusy: 7, MemoryLimit: 200 << 20}
	if err := tel.LimitMetrics(func() telemetry.LimitStats { return st }); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, tel)
	for _, want := range []string{
		"contractd_connections_open 3\n", "contractd_inflight_bytes 1.048576e+06\n",
		"contractd_server_busy_total 7\n", "contractd_memory_limit_bytes 2.097152e+08\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, grep(body, "contractd_"))
		}
	}
	st.RefusedBusy = 9
	if body := scrape(t, tel); !strings.Contains(body, "contractd_server_busy_total 9\n") {
		t.Errorf("not read at scrape time:\n%s", grep(body, "busy"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
