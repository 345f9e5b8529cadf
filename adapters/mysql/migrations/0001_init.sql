-- txmq mysql: batches stored in the app's MySQL/MariaDB database, claimed with
-- SELECT ... FOR UPDATE SKIP LOCKED.
--
-- Times are BIGINT microseconds since the Unix epoch on the database's clock (UTC_TIMESTAMP(6)),
-- so no session time zone or driver setting (parseTime, loc) can shift them.
-- A row's state is derived from two columns, so that one index serves every claim:
--   lease_token IS NULL, run_at <= now        ready
--   lease_token IS NULL, run_at >  now        delayed (a delay, a retry delay, or held)
--   lease_token NOT NULL, run_at >  now       in flight; run_at is the lease's end
--   lease_token NOT NULL, run_at <= now       lease expired: ready again (deliveries goes on)
-- so "claimable" is exactly run_at <= now, an index range scan on (queue, run_at).
-- A row of an ordered queue behind the first of its key is held: run_at is the largest BIGINT,
-- its own due time kept in due_at, until the row before it is acked or dropped.
-- The claim index names id after run_at (InnoDB's implicit order, spelled out) so pages read
-- in (run_at, id) order, and carries lease_token so Depths reads the index only.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_jobs (
	id          BIGINT          NOT NULL AUTO_INCREMENT,
	queue       VARBINARY(255)  NOT NULL,
	batch_id    VARBINARY(255)  NOT NULL,
	body        LONGBLOB        NOT NULL,
	messages    INT             NOT NULL DEFAULT 0,
	deliveries  INT             NOT NULL DEFAULT 0,
	run_at      BIGINT          NOT NULL,
	lease_owner VARBINARY(255)  NULL,
	lease_token BIGINT          NULL,
	created_at  BIGINT          NOT NULL,
	order_key   VARBINARY(255)  NULL,
	due_at      BIGINT          NULL,
	PRIMARY KEY (id),
	KEY txmq_jobs_claim_idx (queue, run_at, id, lease_token),
	KEY txmq_jobs_order_key_idx (queue, order_key, id)
) ENGINE = InnoDB;

-- Exclusive queues: one row per Exclusive queue, made when a node first claims the queue and
-- never deleted. A claim takes it when its lease_until has passed (UPDATE ... WHERE
-- lease_until <= now, which serialises concurrent claimers on the row); Extend moves it with
-- the lease; Ack, Retry and Drop release it (lease_until 0).
CREATE TABLE IF NOT EXISTS {{schema}}txmq_jobs_exclusive (
	queue       VARBINARY(255)  NOT NULL,
	job_id      BIGINT          NOT NULL,
	lease_until BIGINT          NOT NULL,
	PRIMARY KEY (queue)
) ENGINE = InnoDB;

-- Ordering keys: one row per queue and key, locked (INSERT ... ON DUPLICATE KEY UPDATE) by
-- the transactions that publish, ack, drop or cancel a batch of the key, so that they
-- serialise: MySQL has no transaction-scoped advisory lock.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_job_keys (
	queue       VARBINARY(255)  NOT NULL,
	order_key   VARBINARY(255)  NOT NULL,
	PRIMARY KEY (queue, order_key)
) ENGINE = InnoDB;

-- Queue heartbeats: when a node last fetched each queue (written at most once a minute per
-- queue and backend), read by the abandoned-queue reaper.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_jobs_queues (
	queue         VARBINARY(255)  NOT NULL,
	last_fetch_at BIGINT          NOT NULL,
	PRIMARY KEY (queue)
) ENGINE = InnoDB;

-- Caller ids that deduplicate (core.IDDeduper): one row per queue and id, held until
-- expires_at. token is the publish that holds it, so a publish tells its own rows from
-- others' after its inserts. The reaper deletes expired rows in bounded pages.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_job_ids (
	queue       VARBINARY(255)  NOT NULL,
	id          VARBINARY(255)  NOT NULL,
	expires_at  BIGINT          NOT NULL,
	token       BIGINT          NOT NULL,
	PRIMARY KEY (queue, id),
	KEY txmq_job_ids_expires_idx (expires_at)
) ENGINE = InnoDB;
