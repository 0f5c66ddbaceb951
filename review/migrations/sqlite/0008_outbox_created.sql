-- The outbox purge (DeleteDeliveriesBefore) finds deliveries past the 24 h
-- delivery window by their creation time, oldest first, in batches: without
-- this index each batch scanned the whole outbox (TestSQLiteOtherPlans).
-- IF NOT EXISTS: a half-applied copy made by hand does not stop the store.
CREATE INDEX IF NOT EXISTS webhook_outbox_created ON webhook_outbox (created_ns);
