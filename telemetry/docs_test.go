package telemetry_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/review"
	"github.com/contractd/contractd/telemetry"
)

// TestMetricsDocumented: the metric families /metrics exposes are exactly
// the rows of docs/observability.md's metric table. Every group serve
// registers is registered here as serve does, with an observation each (a
// family without a sample has no # TYPE line), after the request
// scenarios; and every metric the package declares (DeclaredMetrics: the
// only names its meter creates instruments under) is among the exposed
// families, so a metric added without an observation here fails too.
func TestMetricsDocumented(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	runScenarios(t, h)
	tel := h.tel
	if err := tel.LimitMetrics(func() telemetry.LimitStats {
		return telemetry.LimitStats{Connections: 1, InflightBytes: 1, RefusedBusy: 1, MemoryLimit: 1 << 30}
	}); err != nil {
		t.Fatal(err)
	}
	rm, err := tel.ReviewMetrics(func(context.Context) (map[string]int, error) { return map[string]int{"classify": 1}, nil })
	if err != nil {
		t.Fatal(err)
	}
	rm.StoreError()
	rm.ItemLost()
	rm.Resolved("classify", review.StatusApproved, review.ByReviewer)
	rm.Delivery(proxy.DeliverySuccess)
	if err := tel.DedupeMetrics(func() (int, int64) { return 1, 1 }); err != nil {
		t.Fatal(err)
	}
	rlm, err := tel.RateLimitMetrics()
	if err != nil {
		t.Fatal(err)
	}
	rlm.StoreError()
	if err := tel.AuditMetrics(func() int64 { return 1 }); err != nil {
		t.Fatal(err)
	}
	pm, err := tel.PanicMetrics()
	if err != nil {
		t.Fatal(err)
	}
	pm.Panic(proxy.PanicHandler)

	exposed := map[string]bool{}
	for _, line := range strings.Split(scrape(t, tel), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" &&
			(strings.HasPrefix(f[2], "contractd_") || strings.HasPrefix(f[2], "http_server_")) {
			exposed[f[2]] = true
		}
	}
	documented := documentedMetrics(t)
	for name := range exposed {
		if !documented[name] {
			t.Errorf("%s is exposed on /metrics but not in docs/observability.md's metric table", name)
		}
	}
	for name := range documented {
		if !exposed[name] {
			t.Errorf("docs/observability.md documents %s, which /metrics does not expose", name)
		}
	}
	// Prose and PromQL anywhere in the docs name only exposed families
	// (or their histogram series), besides two PostgreSQL identifiers.
	notMetrics := map[string]string{
		"contractd_review_resolved":   "review/postgres.go", // the LISTEN/NOTIFY channel
		"contractd_schema_migrations": "review/postgres.go", // the migrations table
	}
	for name, file := range notMetrics {
		if b, err := os.ReadFile(filepath.Join("..", file)); err != nil || !strings.Contains(string(b), name) {
			t.Errorf("%s is no longer in %s: drop it from notMetrics (%v)", name, file, err)
		}
	}
	pages, _ := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	for _, p := range append(pages, filepath.Join("..", "README.md")) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range regexp.MustCompile(`\bcontractd_[a-z_]+`).FindAllString(string(b), -1) {
			family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if _, ok := notMetrics[name]; !ok && !exposed[family] {
				t.Errorf("%s names %s, which /metrics does not expose", filepath.Base(p), name)
			}
		}
	}
	for _, name := range telemetry.DeclaredMetrics() {
		if name = exposedName(name); !exposed[name] {
			t.Errorf("the package declares metric %s, which this test never saw exposed (register and observe it above, and document it)", name)
		}
	}
}

// documentedMetrics are the names in the first column of the table under
// docs/observability.md's "## Metrics" heading.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	sec := testkit.DocSection(t, "docs/observability.md", "## Metrics")
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(sec, -1) {
		out[m[1]] = true
	}
	if len(out) < 10 {
		t.Fatalf("only %d metric rows read from docs/observability.md: %v", len(out), out)
	}
	return out
}

// exposedName is a metric's name on /metrics: contractd's own as written,
// OpenTelemetry's dotted names as the Prometheus exporter writes them
// (dots to underscores, the unit "s" as _seconds).
func exposedName(name string) string {
	if strings.Contains(name, ".") {
		name = strings.ReplaceAll(name, ".", "_")
		if strings.HasSuffix(name, "_duration") {
			name += "_seconds"
		}
	}
	return name
}
