package e2e

import (
	"bytes"
	"testing"
	"time"
)

// contractd_reviews_pending has a series for every contract route of the
// running config from the first scrape the store answers, at 0 while
// nothing is pending, and none for passthrough routes. Before, a route's
// series appeared only once this process had seen one of its items
// pending: with a shared store, a replica started (or first scraped) while
// the queue was empty showed no series at all for a route whose queue
// another replica had filled and emptied, where docs/observability.md
// promises 0, not absent.
func TestReviewsPendingAtZeroFromStart(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, byModel)
	cfg := renderConfig(cfgOpts{upstream: up.URL(), routes: "  - {name: raw, upstream: fake, model: m, passthrough: true}\n"})
	d := startDaemon(t, writeConfig(t, t.TempDir(), cfg), baseEnv())
	var b []byte
	if !waitFor(10*time.Second, func() bool {
		b = d.metrics(t)
		return bytes.Contains(b, []byte(`contractd_reviews_pending{`))
	}) {
		t.Fatalf("no contractd_reviews_pending series:\n%s", b)
	}
	for _, want := range []string{
		`contractd_reviews_pending{route="review-always-bad"} 0`,
		`contractd_reviews_pending{route="review-sentiment"} 0`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("no %s", want)
		}
	}
	if bytes.Contains(b, []byte(`contractd_reviews_pending{route="raw"}`)) {
		t.Errorf("a passthrough route has a pending series")
	}
	needsReview(t, d, "The soup was cold.")
	if b := d.metrics(t); !bytes.Contains(b, []byte(`contractd_reviews_pending{route="review-always-bad"} 1`)) {
		t.Errorf("after one needs_review: no pending 1:\n%s", b)
	}
}
