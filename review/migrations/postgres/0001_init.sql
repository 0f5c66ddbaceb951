-- Review items, as in the SQLite store: JSON held as text exactly as
-- received (the client's request byte for byte), the filterable fields as
-- columns, each indexed in the newest-first order the list pages walk.
-- Times are Unix nanoseconds so cursors are the same on every store. Ids
-- compare bytewise (COLLATE "C") whatever the database's locale.
CREATE TABLE reviews (
	id            TEXT COLLATE "C" PRIMARY KEY,
	status        TEXT NOT NULL,
	created_ns    BIGINT NOT NULL,
	resolved_ns   BIGINT,
	route         TEXT NOT NULL,
	prompt_name   TEXT NOT NULL,
	prompt_sha    TEXT NOT NULL,
	contract_name TEXT NOT NULL,
	contract_sha  TEXT NOT NULL,
	key_id        TEXT NOT NULL,
	input         TEXT NOT NULL,
	request       TEXT NOT NULL,
	attempts      TEXT NOT NULL,
	resolution    TEXT
);
CREATE INDEX reviews_created ON reviews (created_ns DESC, id DESC);
CREATE INDEX reviews_status ON reviews (status, created_ns DESC, id DESC);
CREATE INDEX reviews_route ON reviews (route, created_ns DESC, id DESC);
CREATE INDEX reviews_contract ON reviews (contract_name, created_ns DESC, id DESC);
CREATE INDEX reviews_resolved ON reviews (status, resolved_ns);
CREATE INDEX reviews_pending_route ON reviews (status, route);
CREATE INDEX reviews_export ON reviews ((COALESCE(resolved_ns, created_ns)) DESC, id DESC);

-- One row per (item, violation rule) for the rule= filter.
CREATE TABLE review_rules (
	review_id  TEXT COLLATE "C" NOT NULL REFERENCES reviews (id) ON DELETE CASCADE,
	rule       TEXT NOT NULL,
	created_ns BIGINT NOT NULL,
	PRIMARY KEY (review_id, rule)
);
CREATE INDEX review_rules_rule ON review_rules (rule, created_ns DESC, review_id DESC);

-- Webhook outbox: written in the same statement or transaction as the item
-- change; replicas claim due rows with FOR UPDATE SKIP LOCKED.
CREATE TABLE webhook_outbox (
	id         TEXT PRIMARY KEY,
	type       TEXT NOT NULL,
	review_id  TEXT NOT NULL,
	body       BYTEA NOT NULL,
	created_ns BIGINT NOT NULL,
	next_ns    BIGINT NOT NULL,
	tries      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_outbox_next ON webhook_outbox (next_ns);
