-- txmq ledger mode: the batches published while Options.Mode is on, kept (body and all) until
-- their settle (completion or dead letter) is recorded; a batch past its deadline is published
-- again from here by one node of the cluster at a time (package ledger, republish.go).
CREATE TABLE {{schema}}.txmq_ledger_batches (
	queue       text        NOT NULL,
	batch_id    text        NOT NULL,
	body        bytea       NOT NULL,
	exclusive   boolean     NOT NULL DEFAULT false,
	order_key   text        NOT NULL DEFAULT '',
	messages    integer     NOT NULL DEFAULT 0,
	due         timestamptz,
	kept_at     timestamptz NOT NULL DEFAULT now(),
	deadline    timestamptz NOT NULL,
	republished integer     NOT NULL DEFAULT 0,
	PRIMARY KEY (queue, batch_id)
);
CREATE INDEX txmq_ledger_batches_deadline ON {{schema}}.txmq_ledger_batches (deadline);
