-- txmq sqlite: batches stored in the app's SQLite database file, claimed in BEGIN IMMEDIATE
-- transactions (SQLite has one writer at a time: the write lock serialises every claim, settle
-- and keyed publish across all processes on the file, so no row locks are needed).
--
-- Times are INTEGER microseconds since the Unix epoch on the machine's clock (every process
-- on a SQLite file runs on the one machine that holds it).
-- A row's state is derived from two columns, so that one index serves every claim:
--   lease_token IS NULL, run_at <= now        ready
--   lease_token IS NULL, run_at >  now        delayed (a delay, a retry delay, or held)
--   lease_token NOT NULL, run_at >  now       in flight; run_at is the lease's end
--   lease_token NOT NULL, run_at <= now       lease expired: ready again (deliveries goes on)
-- so "claimable" is exactly run_at <= now, an index range scan on (queue, run_at).
-- A row of an ordered queue behind the first of its key is held: run_at is the largest
-- INTEGER, its own due time kept in due_at, until the row before it is acked or dropped.
-- AUTOINCREMENT: a row id is never reused, so a handle (id and lease token) or a lookup by id
-- never meets a later row.
CREATE TABLE IF NOT EXISTS txmq_jobs (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	queue       TEXT    NOT NULL,
	batch_id    TEXT    NOT NULL,
	body        BLOB    NOT NULL,
	messages    INTEGER NOT NULL DEFAULT 0,
	deliveries  INTEGER NOT NULL DEFAULT 0,
	run_at      INTEGER NOT NULL,
	lease_owner TEXT    NULL,
	lease_token INTEGER NULL,
	created_at  INTEGER NOT NULL,
	order_key   TEXT    NULL,
	due_at      INTEGER NULL
);
CREATE INDEX IF NOT EXISTS txmq_jobs_claim_idx ON txmq_jobs (queue, run_at, id, lease_token);
CREATE INDEX IF NOT EXISTS txmq_jobs_order_key_idx ON txmq_jobs (queue, order_key, id);

-- Exclusive queues: one row per Exclusive queue, made when a node first claims the queue and
-- never deleted. A claim takes it when its lease_until has passed; Extend moves it with the
-- lease; Ack, Retry and Drop release it (lease_until 0).
CREATE TABLE IF NOT EXISTS txmq_jobs_exclusive (
	queue       TEXT    NOT NULL PRIMARY KEY,
	job_id      INTEGER NOT NULL,
	lease_until INTEGER NOT NULL
);

-- Queue heartbeats: when a node last fetched each queue (written at most once a minute per
-- queue and backend), read by the abandoned-queue reaper.
CREATE TABLE IF NOT EXISTS txmq_jobs_queues (
	queue         TEXT    NOT NULL PRIMARY KEY,
	last_fetch_at INTEGER NOT NULL
);

-- Caller ids that deduplicate (core.IDDeduper): one row per queue and id, held until
-- expires_at. token is the publish that holds it. The reaper deletes expired rows in bounded
-- pages.
CREATE TABLE IF NOT EXISTS txmq_job_ids (
	queue       TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	expires_at  INTEGER NOT NULL,
	token       INTEGER NOT NULL,
	PRIMARY KEY (queue, id)
);
CREATE INDEX IF NOT EXISTS txmq_job_ids_expires_idx ON txmq_job_ids (expires_at);
