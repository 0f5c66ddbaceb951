package telemetry_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/telemetry"
)

// Requests on the Responses edge are counted in the same series as chat
// completions: the metrics gain no label for the API (the audit's "api"
// field tells them apart).
func TestResponsesMetricsNoNewLabel(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	before := parseSamples(t, scrapeAdmin(t, h.tel))
	count := func(s samples, outcome string) float64 {
		if _, ok := s[seriesKey(telemetry.MetricRequests, map[string]string{"route": "classify", "outcome": outcome})]; !ok {
			return 0
		}
		return s.get(t, telemetry.MetricRequests, "route", "classify", "outcome", outcome)
	}
	for _, tc := range []struct {
		scenario string
		status   int
	}{{"valid", 200}, {"review", 422}} {
		body := `{"model":"classify","input":[],"contract_input":` + scenarioInput(tc.scenario) + `}`
		if resp, b := h.post("/v1/responses", clientKey, body, nil); resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d: %s", tc.scenario, resp.StatusCode, tc.status, b)
		}
	}
	text := scrapeAdmin(t, h.tel)
	after := parseSamples(t, text)
	for _, outcome := range []string{"valid", "needs_review"} {
		if d := count(after, outcome) - count(before, outcome); d != 1 {
			t.Errorf("requests_total{route=classify,outcome=%s} grew by %v, want 1", outcome, d)
		}
	}
	label := regexp.MustCompile(`[{,]api="`)
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "contractd_") && label.MatchString(line) {
			t.Errorf("a series with an api label: %s", line)
		}
	}
}
