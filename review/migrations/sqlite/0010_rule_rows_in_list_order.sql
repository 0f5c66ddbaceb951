-- review_rules keyed in the rule filter's order, its one b-tree. It was
-- keyed by (review_id, rule) with a separate index by (rule, status,
-- created_ns, review_id) for the list: every rule row of a new item went
-- into both, the table at a random place (the item id), and the two
-- together were 4.8 of the 12.8 pages a single-item commit wrote to the
-- WAL (docs/benchmarks.md, session 14). Keyed by the index's columns the
-- table is the index, read backwards for newest first as before.
--
-- No foreign key: with the item's id no longer the key's prefix, the
-- cascade on an item's deletion would search the whole table for its rows.
-- The store finds an item's rule rows by their full key instead (the
-- item's rules from its attempts, its status and creation time): Resolve
-- moves them to the new status, retention deletes them with the item.
CREATE TABLE review_rules_new (
	rule          TEXT NOT NULL,
	status        TEXT NOT NULL,
	created_ns    INTEGER NOT NULL,
	review_id     TEXT NOT NULL,
	route         TEXT NOT NULL,
	contract_name TEXT NOT NULL,
	PRIMARY KEY (rule, status, created_ns, review_id)
) WITHOUT ROWID;
INSERT INTO review_rules_new (rule, status, created_ns, review_id, route, contract_name)
	SELECT rule, status, created_ns, review_id, route, contract_name FROM review_rules;
DROP TABLE review_rules;
ALTER TABLE review_rules_new RENAME TO review_rules;
