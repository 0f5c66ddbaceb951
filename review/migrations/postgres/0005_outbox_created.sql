-- The outbox purge (DeleteDeliveriesBefore) finds deliveries past the 24 h
-- delivery window by their creation time, oldest first, in batches: without
-- this index each batch scanned the whole outbox (TestPostgresListPlans).
-- Replicas starting together apply it once (the advisory lock and the
-- version row); IF NOT EXISTS keeps it harmless if an operator made it first.
CREATE INDEX IF NOT EXISTS webhook_outbox_created ON webhook_outbox (created_ns);
