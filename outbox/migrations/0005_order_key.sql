-- txmq ordered queues: the ordering key of a batch (NULL on unordered queues). The relay, the
-- sweep and the after-commit publishers publish a keyed row only once every earlier row of its
-- queue and key is gone from the table (published or dead-lettered), reading the earlier rows
-- through this index.
ALTER TABLE {{schema}}.txmq_outbox ADD COLUMN order_key text NULL;
CREATE INDEX txmq_outbox_order_key_idx ON {{schema}}.txmq_outbox (queue, order_key, id)
	WHERE order_key IS NOT NULL;
