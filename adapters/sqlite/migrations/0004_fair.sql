-- Fair share by key (core.FairSharer): fair_key is the batch's fairness key ('' on queues
-- that are not fair, and the empty key of a fair queue), written once when the row is stored
-- and never changed: a retry, a lease, an expired lease, an expedite or the head of an
-- ordering key move run_at only. A claim of a fair queue walks the queue's distinct keys
-- through (queue, fair_key, run_at, id, lead_us), one index probe per key (the probe's first
-- entry is the key's earliest run_at: whether it has a ready row), and reads each chosen key's
-- first ready rows the same way, from the index alone. txmq_jobs_fair keeps, per fair queue,
-- the last key served (the turn); the claim's BEGIN IMMEDIATE transaction, which holds the
-- file's write lock, serialises the queue's fair claims across every process.
ALTER TABLE txmq_jobs ADD COLUMN fair_key TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS txmq_jobs_fair_idx ON txmq_jobs (queue, fair_key, run_at, id, lead_us);

-- Fair, prioritized queues (core.FairPrioritizer): within the key whose turn it is, a claim
-- takes the rows with the earliest run_at minus lead. It reads the key's first ready rows by
-- run_at through txmq_jobs_fair_idx (every priority-0 row among the best is among them: a
-- row due before it ranks ahead of it) and the first ready rows of each priority 1..9
-- through this index, one range scan per level. Partial: only rows with a priority above 0
-- (rows of prioritized queues) get an entry, so other queues' publishes pay nothing for it.
CREATE INDEX IF NOT EXISTS txmq_jobs_fair_priority_idx ON txmq_jobs (queue, fair_key, priority, run_at, id, lead_us)
	WHERE priority > 0;

CREATE TABLE IF NOT EXISTS txmq_jobs_fair (
	queue    TEXT NOT NULL PRIMARY KEY,
	last_key TEXT NOT NULL DEFAULT ''
);
