package telemetry_test

import (
	"strings"
	"testing"
)

// The rate-limit store counter is on /metrics at 0 from the start and
// counts each StoreError.
func TestRateLimitStoreErrorsMetric(t *testing.T) {
	tel := bareTelemetry(t)
	m, err := tel.RateLimitMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		errors int
		want   string
	}{{0, "contractd_rate_limit_store_errors_total 0\n"}, {2, "contractd_rate_limit_store_errors_total 2\n"}, {1, "contractd_rate_limit_store_errors_total 3\n"}} {
		for i := 0; i < tc.errors; i++ {
			m.StoreError()
		}
		if s := scrape(t, tel); !strings.Contains(s, tc.want) {
			t.Errorf("want %q in:\n%s", tc.want, s)
		}
	}
}
