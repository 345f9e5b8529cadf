-- txmq ledger: one row per message (queue, id), its last known state. The primary key leads
-- with id, for lookups by id alone. Written in groups by the
-- nodes (package ledger); completed and cancelled rows are pruned after the retention.
CREATE TABLE {{schema}}.txmq_ledger (
	queue        text        NOT NULL,
	id           text        NOT NULL,
	batch_id     text        NOT NULL DEFAULT '',
	state        text        NOT NULL,
	published_at timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	due          timestamptz,
	node         text        NOT NULL DEFAULT '',
	runs         integer     NOT NULL DEFAULT 0,
	error        text        NOT NULL DEFAULT '',
	reason       text        NOT NULL DEFAULT '',
	PRIMARY KEY (id, queue)
);
CREATE INDEX txmq_ledger_published ON {{schema}}.txmq_ledger (published_at);
CREATE INDEX txmq_ledger_queue_published ON {{schema}}.txmq_ledger (queue, published_at);
CREATE INDEX txmq_ledger_prune ON {{schema}}.txmq_ledger (updated_at) WHERE state IN ('completed', 'cancelled');
CREATE INDEX txmq_ledger_cancelled ON {{schema}}.txmq_ledger (updated_at) WHERE state = 'cancelled';
