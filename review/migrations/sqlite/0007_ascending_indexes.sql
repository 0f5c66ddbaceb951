-- The list indexes in ascending order. A new item's keys are the newest,
-- so in a descending index each insert went to the front of its range,
-- and SQLite's rebalancing packs cells to the left: the front page was full
-- again after almost every insert and split, about 1.7 pages per index per
-- commit written to the WAL instead of 1 (docs/benchmarks.md, session 5).
-- Ascending, new keys land at the end of their range, and the list's
-- newest-first order is the same index read backwards (TestSQLiteListPlans).
DROP INDEX reviews_created;
DROP INDEX reviews_status;
DROP INDEX reviews_route;
DROP INDEX reviews_contract;
DROP INDEX reviews_status_route;
DROP INDEX reviews_status_done;
DROP INDEX review_rules_rule;
DROP INDEX review_rules_rule_status;
CREATE INDEX reviews_created ON reviews (created_ns, id);
CREATE INDEX reviews_status ON reviews (status, created_ns, id);
CREATE INDEX reviews_route ON reviews (route, created_ns, id);
CREATE INDEX reviews_contract ON reviews (contract_name, created_ns, id);
CREATE INDEX reviews_status_route ON reviews (status, route, created_ns, id);
CREATE INDEX reviews_status_done ON reviews (status, COALESCE(resolved_ns, created_ns), id);
CREATE INDEX review_rules_rule ON review_rules (rule, created_ns, review_id);
CREATE INDEX review_rules_rule_status ON review_rules (rule, status, created_ns, review_id);
