-- Prioritized queues (core.Prioritizer): priority is the batch's priority (0 to 9, 0 on other
-- queues) and lead_us its lead in microseconds (priority times the queue's aging step). Both
-- are written once, when the row is stored, and never changed: a retry, a lease, an expired
-- lease, an expedite or the head of an ordering key move run_at only. A claim of a prioritized
-- queue reads the first ready rows of each priority through (queue, priority, run_at, id,
-- lead_us), one range scan per level reading the index alone, and takes them by run_at minus
-- lead.
ALTER TABLE txmq_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE txmq_jobs ADD COLUMN lead_us INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS txmq_jobs_priority_idx ON txmq_jobs (queue, priority, run_at, id, lead_us);
