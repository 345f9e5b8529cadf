-- Unique keys (core.UniqueKeeper): the batch that took each key of a queue, its row in txmq_jobs
-- (job_id, by primary key), the SHA-256 of the body it was stored with (a different body now
-- means a retry rewrote it: it ran) and until when a UniqueWindow key is held (expires_at,
-- microseconds; the publish time for the modes held by the row's state). A unique publish reads
-- the key's row, judges the holder and stores the batch and moves the key in one BEGIN
-- IMMEDIATE transaction (the file's write lock serialises them). The reaper deletes rows whose
-- window passed and whose batch is gone.
CREATE TABLE IF NOT EXISTS txmq_jobs_unique (
	queue      TEXT    NOT NULL,
	ukey       TEXT    NOT NULL,
	batch_id   TEXT    NOT NULL,
	job_id     INTEGER NOT NULL,
	body_sum   BLOB    NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (queue, ukey)
);
CREATE INDEX IF NOT EXISTS txmq_jobs_unique_expires_idx ON txmq_jobs_unique (expires_at);
