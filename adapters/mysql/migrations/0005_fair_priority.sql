-- Fair, prioritized queues (core.FairPrioritizer): within the key whose turn it is, a claim
-- takes the rows with the earliest run_at minus lead. It reads each key's first ready rows by
-- run_at through (queue, fair_key, run_at, id) (every priority-0 row among the best is among
-- them: a row due before it ranks ahead of it) and the first ready rows of each priority 1..9
-- through this index, one range scan per level. MySQL has no partial index: every row gets an
-- entry.
ALTER TABLE {{schema}}txmq_jobs
	ADD KEY txmq_jobs_fair_priority_idx (queue, fair_key, priority, run_at, id);
