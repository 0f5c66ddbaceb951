-- review_rules without a rowid: its rows are found by (review_id, rule)
-- anyway, and the separate rowid b-tree cost every new item one more
-- b-tree insert, and every commit one more page written to the WAL.
CREATE TABLE review_rules_new (
	review_id     TEXT NOT NULL REFERENCES reviews (id) ON DELETE CASCADE,
	rule          TEXT NOT NULL,
	created_ns    INTEGER NOT NULL,
	status        TEXT NOT NULL DEFAULT 'pending',
	route         TEXT NOT NULL DEFAULT '',
	contract_name TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (review_id, rule)
) WITHOUT ROWID;
INSERT INTO review_rules_new (review_id, rule, created_ns, status, route, contract_name)
	SELECT review_id, rule, created_ns, status, route, contract_name FROM review_rules;
DROP TABLE review_rules;
ALTER TABLE review_rules_new RENAME TO review_rules;
CREATE INDEX review_rules_rule ON review_rules (rule, created_ns DESC, review_id DESC);
CREATE INDEX review_rules_rule_status ON review_rules (rule, status, created_ns DESC, review_id DESC);
