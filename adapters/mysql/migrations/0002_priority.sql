-- Prioritized queues (core.Prioritizer): priority is the batch's priority (0 to 9, 0 on other
-- queues) and lead_us its lead in microseconds (priority times the queue's aging step). A claim
-- of a prioritized queue reads the first ready rows of each priority through
-- (queue, priority, run_at, id), one range scan per level, and takes them by run_at minus lead.
ALTER TABLE {{schema}}txmq_jobs
	ADD COLUMN priority SMALLINT NOT NULL DEFAULT 0,
	ADD COLUMN lead_us BIGINT NOT NULL DEFAULT 0,
	ADD KEY txmq_jobs_priority_idx (queue, priority, run_at, id);
