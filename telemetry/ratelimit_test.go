package telemetry_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contractd/contractd/telemetry"
)

// The rate-limit store counter is on /metrics at 0 from the start and
// counts each StoreError.
func TestRateLimitStoreErrorsMetric(t *testing.T) {
	tel, err := telemetry.New(telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(t.Context())
	m, err := tel.RateLimitMetrics()
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		w := httptest.NewRecorder()
		tel.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(w.Body)
		return string(b)
	}
	for _, tc := range []struct {
		errors int
		want   string
	}{{0, "contractd_rate_limit_store_errors_total 0\n"}, {2, "contractd_rate_limit_store_errors_total 2\n"}, {1, "contractd_rate_limit_store_errors_total 3\n"}} {
		for i := 0; i < tc.errors; i++ {
			m.StoreError()
		}
		if s := scrape(); !strings.Contains(s, tc.want) {
			t.Errorf("want %q in:\n%s", tc.want, s)
		}
	}
}
