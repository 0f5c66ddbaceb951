-- Indexes that answer every list filter in newest-first order without a
-- sort (TestSQLiteListPlans): status with route, and the resolution time
-- that export and retention read. They replace the two they cover.
DROP INDEX reviews_pending_route;
DROP INDEX reviews_resolved;
CREATE INDEX reviews_status_route ON reviews (status, route, created_ns DESC, id DESC);
CREATE INDEX reviews_status_done ON reviews (status, COALESCE(resolved_ns, created_ns) DESC, id DESC);
