-- txmq sqljobs: batches stored in the app's database, claimed with FOR UPDATE SKIP LOCKED.
--
-- A row's state is derived from two columns, so that one index serves every claim:
--   lease_token IS NULL, run_at <= now()      ready
--   lease_token IS NULL, run_at >  now()      delayed (NotBefore or a retry delay)
--   lease_token NOT NULL, run_at >  now()     in flight; run_at is the lease's end
--   lease_token NOT NULL, run_at <= now()     lease expired: ready again (deliveries goes on)
-- so "claimable" is exactly run_at <= now(), an index range scan on (queue, run_at).
CREATE TABLE {{schema}}.txmq_jobs (
	id          bigserial   PRIMARY KEY,
	queue       text        NOT NULL,
	batch_id    text        NOT NULL,
	body        bytea       NOT NULL,
	messages    int         NOT NULL DEFAULT 0,
	deliveries  int         NOT NULL DEFAULT 0,   -- handouts since stored or last Retry rewrite
	run_at      timestamptz NOT NULL DEFAULT now(),
	lease_owner text        NULL,                 -- FetchRequest.Node of the last claim
	lease_token bigint      NULL,                 -- from txmq_jobs_lease_seq, new per claim
	created_at  timestamptz NOT NULL DEFAULT now()
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

CREATE INDEX txmq_jobs_claim_idx ON {{schema}}.txmq_jobs (queue, run_at);

-- Lease tokens: a new one per claim, so a settle from an earlier holder never matches.
CREATE SEQUENCE {{schema}}.txmq_jobs_lease_seq;

-- Exclusive queues: one row per queue while one of its batches is claimed anywhere. Taken in
-- the claim statement (INSERT ... ON CONFLICT DO UPDATE ... WHERE the old lease ran out),
-- extended with the job's lease, deleted by Ack, Retry and Drop.
CREATE TABLE {{schema}}.txmq_jobs_exclusive (
	queue       text        PRIMARY KEY,
	job_id      bigint      NOT NULL,
	lease_until timestamptz NOT NULL
);

-- Queue heartbeats: when a node last fetched each queue (written at most once a minute per
-- queue and backend), read by the abandoned-queue reaper.
CREATE TABLE {{schema}}.txmq_jobs_queues (
	queue         text        PRIMARY KEY,
	last_fetch_at timestamptz NOT NULL
);
