-- Unique keys (core.UniqueKeeper): the batch that took each key of a queue, its row in
-- txmq_jobs (job_id, looked up by primary key), the md5 of the body it was stored with (a
-- different body now means a retry rewrote it: it ran) and until when a UniqueWindow key is held
-- (expires_at; the publish time for the modes held by the row's state). A publish with a key
-- inserts its row or locks the one there (FOR UPDATE), judges the holder by the mode, and
-- stores the batch and moves the key to it in the same transaction. The reaper deletes rows
-- whose window has passed and whose batch is gone.
CREATE TABLE {{schema}}.txmq_jobs_unique (
	queue      text        NOT NULL,
	ukey       text        COLLATE "C" NOT NULL,
	batch_id   text        NOT NULL,
	job_id     bigint      NOT NULL,
	body_md5   text        NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (queue, ukey)
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

CREATE INDEX txmq_jobs_unique_expires_idx ON {{schema}}.txmq_jobs_unique (expires_at);
