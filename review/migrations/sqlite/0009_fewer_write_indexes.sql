-- Fewer b-trees written per stored item (docs/benchmarks.md, session 12):
-- every index a new item enters costs its commit one more page or so
-- written to the WAL, and a commit's latency is mostly those writes.
-- 19.4 pages per single-item commit became 12.8.
--
-- reviews_created (created_ns, id), reviews_route (route, created_ns, id)
-- and review_rules_rule (rule, created_ns, review_id) served the list
-- without a status filter, the route filter and the rule filter without
-- one, and the dedupe poll. Those now read the index that also holds the
-- status (reviews_status, reviews_status_route, review_rules_rule_status)
-- once per status and merge the three in order (TestSQLiteListPlans,
-- TestSQLiteOtherPlans). A rule index entry is one per rule of an item.
--
-- reviews_status_done (status, resolution time, id) is read for resolved
-- items only (retention; export of a resolved status; a pending export
-- reads reviews_status): it now holds only them, so an item enters it when
-- it is resolved, not when it is created.
--
-- Dropping an index is quick; the partial index is built once from the
-- resolved items (seconds at a million items).
DROP INDEX reviews_created;
DROP INDEX reviews_route;
DROP INDEX review_rules_rule;
DROP INDEX reviews_status_done;
CREATE INDEX reviews_status_done ON reviews (status, resolved_ns, id) WHERE resolved_ns IS NOT NULL;
