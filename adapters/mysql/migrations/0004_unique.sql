-- Unique keys (core.UniqueKeeper): the batch that took each key of a queue, its row in txmq_jobs
-- (job_id, by primary key), the SHA-256 (hex) of the body it was stored with (a different body
-- now means a retry rewrote it: it ran) and until when a UniqueWindow key is held (expires_at,
-- microseconds of the database's clock; the publish time for the modes held by the row's
-- state). A unique publish makes or locks the key's row (INSERT ... ON DUPLICATE KEY UPDATE, then
-- a locking read by primary key), judges the holder, stores the batch and moves the key in one
-- transaction. The reaper deletes rows whose window passed and whose batch is gone.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_jobs_unique (
	queue      VARBINARY(255) NOT NULL,
	ukey       VARBINARY(255) NOT NULL,
	batch_id   VARBINARY(255) NOT NULL,
	job_id     BIGINT         NOT NULL,
	body_sum   CHAR(64)       NOT NULL,
	expires_at BIGINT         NOT NULL,
	PRIMARY KEY (queue, ukey),
	KEY txmq_jobs_unique_expires_idx (expires_at)
) ENGINE = InnoDB;
