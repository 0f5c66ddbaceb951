-- review.dedupe_window (docs/clients.md): an identical repeat of a request that
-- ended in needs_review, on any process sharing this file, finds the item
-- by its dedupe key and gets the stored 422 again. The partial index holds
-- only items written with a key.
ALTER TABLE reviews ADD COLUMN dedupe_key TEXT;
ALTER TABLE reviews ADD COLUMN dedupe_until_ns INTEGER;
ALTER TABLE reviews ADD COLUMN dedupe_answer TEXT;
CREATE INDEX reviews_dedupe ON reviews (dedupe_key, dedupe_until_ns DESC) WHERE dedupe_key IS NOT NULL;
