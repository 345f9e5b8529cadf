-- Fair, prioritized queues (core.FairPrioritizer): within the key whose turn it is, a claim
-- takes the rows with the earliest run_at minus lead. It reads the key's first ready rows by
-- run_at through (queue, fair_key, run_at) (every priority-0 row among the best is among
-- them: a row due before it ranks ahead of it) and the first ready rows of each priority
-- 1..9 through this index, one short range scan per level. Partial: only rows with a
-- priority above 0 (rows of prioritized queues) get an entry, so other queues' publishes pay
-- nothing for it. Numbered 0009, 0008 being left to another change in flight.
CREATE INDEX txmq_jobs_fair_priority_idx ON {{schema}}.txmq_jobs (queue, fair_key, priority, run_at)
	WHERE priority > 0;
