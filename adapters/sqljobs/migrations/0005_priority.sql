-- Prioritized queues (core.Prioritizer): priority is the batch's priority (0 to 9, 0 on other
-- queues) and lead_us its lead in microseconds (priority times the queue's aging step). A claim
-- of a prioritized queue reads the first ready rows of each priority through
-- (queue, priority, run_at), one short range scan per level, and takes them by run_at minus
-- lead: within one priority that is run_at order, so the first rows by "due - lead" are among
-- them. Other queues' claims keep using (queue, run_at). Adding the columns with constant
-- defaults rewrites no row.
ALTER TABLE {{schema}}.txmq_jobs ADD COLUMN priority smallint NOT NULL DEFAULT 0,
	ADD COLUMN lead_us bigint NOT NULL DEFAULT 0;
CREATE INDEX txmq_jobs_priority_idx ON {{schema}}.txmq_jobs (queue, priority, run_at);
