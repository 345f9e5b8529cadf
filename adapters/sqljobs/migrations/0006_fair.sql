-- Fair queues (core.FairSharer): fair_key is the batch's fairness key ('' on other queues and
-- for a fair queue's publishes without one, the empty key). A claim of a fair queue walks the
-- queue's distinct keys through (queue, fair_key, run_at), one index probe per key, from the
-- key after the last one served (txmq_jobs_fair.last_key), taking one ready row per key in turn.
-- COLLATE "C": the keys are printable ASCII, compared bytewise, so "the key after k" is exactly
-- the first key >= k || chr(1). Adding the column with a constant default rewrites no row.
ALTER TABLE {{schema}}.txmq_jobs ADD COLUMN fair_key text COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX txmq_jobs_fair_idx ON {{schema}}.txmq_jobs (queue, fair_key, run_at);

-- The turn of each fair queue: the key whose row the last claim took.
CREATE TABLE {{schema}}.txmq_jobs_fair (
	queue    text PRIMARY KEY,
	last_key text COLLATE "C" NOT NULL
);
