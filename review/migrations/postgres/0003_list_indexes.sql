-- Every list filter answered from an index in newest-first order, as on
-- SQLite (TestPostgresListPlans): status with route, status with the
-- resolution time (export, retention), and rule filters combined with
-- status, route or contract answered from review_rules alone, whose rows
-- carry their item's status (kept in step by Resolve), route and contract.
CREATE INDEX reviews_status_route ON reviews (status, route, created_ns DESC, id DESC);
CREATE INDEX reviews_status_done ON reviews (status, (COALESCE(resolved_ns, created_ns)) DESC, id DESC);
DROP INDEX reviews_pending_route;
DROP INDEX reviews_resolved;
ALTER TABLE review_rules
	ADD COLUMN status TEXT NOT NULL DEFAULT 'pending',
	ADD COLUMN route TEXT NOT NULL DEFAULT '',
	ADD COLUMN contract_name TEXT NOT NULL DEFAULT '';
UPDATE review_rules x SET status = r.status, route = r.route, contract_name = r.contract_name
	FROM reviews r WHERE r.id = x.review_id;
CREATE INDEX review_rules_rule_status ON review_rules (rule, status, created_ns DESC, review_id DESC);
