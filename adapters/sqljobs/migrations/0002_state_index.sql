-- The claim index carries lease_token, so Depths counts ready, in-flight and delayed batches
-- of a queue with an index-only scan (O(batches of that queue) index entries, no heap reads
-- once the visibility map is set) instead of visiting every row. Claims use it as before: a
-- range scan of (queue, run_at <= now()). Built before the old index is dropped, so claims
-- never run without one.
CREATE INDEX txmq_jobs_queue_state_idx ON {{schema}}.txmq_jobs (queue, run_at) INCLUDE (lease_token);
DROP INDEX {{schema}}.txmq_jobs_claim_idx;
