-- txmq nodes: one heartbeat row per node (the heartbeat feature writes it every few seconds,
-- and a last one marked stopped as the node closes); the dashboard's nodes page reads it.
-- Rows not seen for a day are pruned by the writers.
CREATE TABLE {{schema}}.txmq_nodes (
	node       text        PRIMARY KEY,
	queues     jsonb       NOT NULL DEFAULT '[]',
	version    text        NOT NULL DEFAULT '',
	started_at timestamptz NOT NULL,
	every_ms   bigint      NOT NULL,
	last_seen  timestamptz NOT NULL DEFAULT now(),
	stopped    boolean     NOT NULL DEFAULT false
);
