-- txmq ledger, layout 2: the messages of a batch share their fate (they run, retry,
-- dead-letter and complete as a unit), so their state lives in one row per batch
-- (txmq_ledger_states), written at each event of the batch, and txmq_ledger keeps one row per
-- message written once at its publish: its queue, id, publish time and batch, and its own
-- state only while it has no batch (staged in a transaction, waiting for the outbox relay) or
-- once it is cancelled. A lookup joins the two (package ledger, query.go). A batch row holds
-- its message ids, by which the pruner deletes them (no index on the messages' batch).
CREATE TABLE {{schema}}.txmq_ledger_states (
	queue        text        NOT NULL,
	batch_id     text        NOT NULL,
	state        text        NOT NULL,
	published_at timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	due          timestamptz,
	node         text        NOT NULL DEFAULT '',
	runs         integer     NOT NULL DEFAULT 0,
	error        text        NOT NULL DEFAULT '',
	reason       text        NOT NULL DEFAULT '',
	messages     integer     NOT NULL DEFAULT 0,
	ids          text[],
	PRIMARY KEY (queue, batch_id)
);
CREATE INDEX txmq_ledger_states_updated ON {{schema}}.txmq_ledger_states (updated_at);
-- The rows of layout 1 stay; each batch takes the state of its most recently updated message
-- that is not cancelled (cancelled messages keep their own state, as in layout 2).
INSERT INTO {{schema}}.txmq_ledger_states (queue, batch_id, state, published_at, updated_at, due, node, runs, error, reason, messages, ids)
SELECT DISTINCT ON (queue, batch_id) queue, batch_id, state, min(published_at) OVER w, updated_at, due, node, runs, error, reason, count(*) OVER w, array_agg(id) OVER w
FROM {{schema}}.txmq_ledger
WHERE batch_id <> '' AND state <> 'cancelled'
WINDOW w AS (PARTITION BY queue, batch_id ORDER BY updated_at DESC ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
ORDER BY queue, batch_id, updated_at DESC;
-- A listing across queues walks the queues' index (query.go), so the index on published_at
-- alone goes: one index entry less per message.
DROP INDEX {{schema}}.txmq_ledger_published;
