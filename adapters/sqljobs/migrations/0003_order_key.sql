-- Ordered queues (core.KeyOrderer): order_key is the batch's ordering key (NULL on unordered
-- queues). Of a queue's rows with one key, only the first (lowest id) is ever claimable: the
-- later ones are held with run_at = 'infinity' (counted as delayed), their own due time kept
-- in due_at, until the row before them is acked or dropped, which makes the next one due.
ALTER TABLE {{schema}}.txmq_jobs ADD COLUMN order_key text NULL, ADD COLUMN due_at timestamptz NULL;
CREATE INDEX txmq_jobs_order_key_idx ON {{schema}}.txmq_jobs (queue, order_key, id)
	WHERE order_key IS NOT NULL;
