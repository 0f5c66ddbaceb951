-- Processes learn each other's dedupe windows by polling the items created
-- since their last poll (reviews_created), not by a lookup per request, so
-- the per-key index is no longer read.
DROP INDEX reviews_dedupe;
