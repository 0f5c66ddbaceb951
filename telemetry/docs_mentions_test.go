package telemetry_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMetricMentionsDocumented: every metric the README, docs/*.md and the
// deploy kits name outside the metric table (review.md's metrics, the
// PromQL, config.md's reload counter, security.md's controls, the
// manifests' comments; a histogram by its _bucket, _sum or _count series)
// is a row of docs/observability.md's metric table, which
// TestMetricsDocumented holds to what /metrics exposes. So an alert
// copied from any page names a series contractd has. Names that the review
// store uses for its own tables and notify channel (contractd_schema_migrations,
// contractd_review_resolved) are not metrics and are recognised by
// appearing in review/'s code.
func TestMetricMentionsDocumented(t *testing.T) {
	table := documentedMetrics(t)
	var storeNames strings.Builder
	for _, pat := range []string{"../review/*.go", "../review/migrations/*/*.sql"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			storeNames.Write(b)
		}
	}
	var pages []string
	for _, pat := range []string{"../README.md", "../docs/*.md", "../deploy/kubernetes/*/*.yaml", "../deploy/kubernetes/overlays/*/*.yaml", "../deploy/systemd/*"} {
		files, _ := filepath.Glob(pat)
		pages = append(pages, files...)
	}
	name := regexp.MustCompile(`\b(?:contractd|http_server)_[a-z_]*[a-z]\b`)
	mentions := 0
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllString(string(b), -1) {
			base := m
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if trimmed, ok := strings.CutSuffix(m, suf); ok && table[trimmed] {
					base = trimmed
				}
			}
			mentions++
			if table[base] {
				continue
			}
			if strings.Contains(storeNames.String(), base) {
				continue // a review store table or channel
			}
			t.Errorf("%s names %s, which is not a metric of docs/observability.md's table", strings.TrimPrefix(p, "../"), m)
		}
	}
	if mentions < 30 {
		t.Fatalf("found %d metric mentions; the pattern no longer reads the pages", mentions)
	}
}
