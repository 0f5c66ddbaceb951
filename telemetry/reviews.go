package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/contractd/contractd/proxy"
	"github.com/contractd/contractd/review"
)

// Review queue metric names.
const (
	MetricReviewsPending    = "contractd_reviews_pending"
	MetricReviewsResolved   = "contractd_reviews_resolved_total"
	MetricReviewStoreErrors = "contractd_review_store_errors_total"
	MetricReviewItemsLost   = "contractd_review_items_lost_total"
	MetricWebhookDeliveries = "contractd_webhook_deliveries_total"
)

// ReviewMetrics counts review queue events (proxy.ReviewMetrics).
type ReviewMetrics struct {
	resolved   metric.Int64Counter
	storeErrs  metric.Int64Counter
	lost       metric.Int64Counter
	deliveries metric.Int64Counter
}

// ReviewMetrics registers the review instruments. pending is read at each
// scrape (bounded by a short timeout) so the gauge is the store's truth,
// shared by every replica of a shared store.
func (t *Telemetry) ReviewMetrics(pending func(ctx context.Context) (map[string]int, error)) (*ReviewMetrics, error) {
	m := t.register()
	r := &ReviewMetrics{
		resolved:   m.counter(MetricReviewsResolved, "Review items resolved, by route, status and by (reviewer, rerun).", "{review}"),
		storeErrs:  m.counter(MetricReviewStoreErrors, "Review items the store could not take (spooled instead).", "{error}"),
		lost:       m.counter(MetricReviewItemsLost, "Review items neither the store nor the spool could take (lost; the 422 said stored: false).", "{review}"),
		deliveries: m.counter(MetricWebhookDeliveries, "Webhook delivery tries by result (success, failure, expired).", "{delivery}"),
	}
	if m.err != nil {
		return nil, m.err
	}
	r.storeErrs.Add(context.Background(), 0)
	r.lost.Add(context.Background(), 0)
	// The store lists only routes with pending items; a route it listed
	// before is observed at 0 once its queue is empty, so the gauge falls
	// back to its idle value instead of its series vanishing (a graph
	// holding the last count, an alert on it staying stale).
	var mu sync.Mutex
	seen := map[string]bool{}
	m.gauge(MetricReviewsPending, "Pending review items by route.", "{review}",
		metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			counts, err := pending(ctx)
			if err != nil {
				return nil // the store is down: no sample rather than a wrong one
			}
			mu.Lock()
			defer mu.Unlock()
			for route, n := range counts {
				seen[route] = true
				o.Observe(int64(n), metric.WithAttributes(attribute.String("route", route)))
			}
			for route := range seen {
				if _, ok := counts[route]; !ok {
					o.Observe(0, metric.WithAttributes(attribute.String("route", route)))
				}
			}
			return nil
		}))
	if m.err != nil {
		return nil, m.err
	}
	return r, nil
}

func (r *ReviewMetrics) StoreError() { r.storeErrs.Add(context.Background(), 1) }

func (r *ReviewMetrics) ItemLost() { r.lost.Add(context.Background(), 1) }

func (r *ReviewMetrics) Resolved(route string, status review.Status, by review.ResolvedBy) {
	r.resolved.Add(context.Background(), 1, metric.WithAttributes(attribute.String("route", route),
		attribute.String("status", string(status)), attribute.String("by", string(by))))
}

func (r *ReviewMetrics) Delivery(result proxy.DeliveryResult) {
	r.deliveries.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", string(result))))
}

// Dedupe cache metric names.
const (
	MetricDedupeEntries   = "contractd_dedupe_entries"
	MetricDedupeEvictions = "contractd_dedupe_evictions_total"
)

// DedupeMetrics registers the dedupe cache's size and evictions, read from
// stats (proxy.Server.DedupeStats) at each scrape.
func (t *Telemetry) DedupeMetrics(stats func() (entries int, evictions int64)) error {
	m := t.register()
	entries := m.gauge(MetricDedupeEntries, "needs_review verdicts held by the dedupe cache (bounded; least recently used evicted).", "{entry}")
	evictions := m.observedCounter(MetricDedupeEvictions, "Verdicts evicted from the dedupe cache at its size limit.", "{entry}")
	if m.err != nil {
		return m.err
	}
	_, err := m.m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, ev := stats()
		o.ObserveInt64(entries, int64(n))
		o.ObserveInt64(evictions, ev)
		return nil
	}, entries, evictions)
	return err
}
