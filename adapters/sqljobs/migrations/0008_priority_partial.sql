-- Fewer index writes per claim: a claim's UPDATE moves run_at (the lease's end), so it can never
-- be a HOT update and writes one entry to every index whose predicate the new row version
-- matches. The priority index of 0005 covered every row, so every claim of every queue wrote to
-- it. It now holds only rows of priority 1 to 9: a row of priority 0 (every row of a queue that
-- is not prioritized) is in the primary key, (queue, run_at) and the fair index only.
--
-- A claim of a prioritized queue reads the first ready rows of each priority 1..9 through this
-- index (the statement says priority <> 0, so the planner can use it under a generic plan) and
-- the first ready rows of the whole queue, any priority, through (queue, run_at): a row of
-- priority 0 that belongs among the queue's first n by "due - lead" is among the queue's first n
-- by due time, since every row due before it sorts before it too (its lead is >= 0). The same
-- claim as before, exact, from one fewer index entry per claim.
--
-- Queues that switch: a queue made prioritized while rows exist claims them as before (they are
-- priority 0, read through (queue, run_at)); a queue no longer prioritized claims its rows of
-- every priority by due time through (queue, run_at), as a plain claim always did.
--
-- Built before the old index is dropped, so prioritized claims never run without one.
CREATE INDEX txmq_jobs_raised_idx ON {{schema}}.txmq_jobs (queue, priority, run_at) WHERE priority <> 0;
DROP INDEX {{schema}}.txmq_jobs_priority_idx;
