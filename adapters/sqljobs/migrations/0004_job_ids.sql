-- Caller ids that deduplicate (core.IDDeduper, txmq.QueueConfig.IDDedupWindow): one row per
-- queue and id, held until expires_at (the database's clock at the publish plus the window).
-- A publish inserts its batch's ids in the transaction that inserts the batch; an id whose
-- row has not expired refuses the publish (ON CONFLICT on the primary key serialises two
-- publishes of one id). The reaper deletes expired rows in bounded pages by expires_at.
CREATE TABLE {{schema}}.txmq_job_ids (
	queue      text        NOT NULL,
	id         text        NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (queue, id)
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

CREATE INDEX txmq_job_ids_expires_idx ON {{schema}}.txmq_job_ids (expires_at);
