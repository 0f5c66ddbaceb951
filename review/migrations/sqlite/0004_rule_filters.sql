-- A rule filter combined with status, route or contract is answered from
-- review_rules alone: each rule row carries its item's status (kept in step
-- by Resolve), route and contract, and (rule, status) is indexed in the
-- list's order.
ALTER TABLE review_rules ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';
ALTER TABLE review_rules ADD COLUMN route TEXT NOT NULL DEFAULT '';
ALTER TABLE review_rules ADD COLUMN contract_name TEXT NOT NULL DEFAULT '';
UPDATE review_rules SET
	status = (SELECT r.status FROM reviews r WHERE r.id = review_id),
	route = (SELECT r.route FROM reviews r WHERE r.id = review_id),
	contract_name = (SELECT r.contract_name FROM reviews r WHERE r.id = review_id);
CREATE INDEX review_rules_rule_status ON review_rules (rule, status, created_ns DESC, review_id DESC);
