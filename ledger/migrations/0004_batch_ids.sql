-- txmq ledger, layout 3: a message made by core.NewID (its id carries the millisecond it was
-- made) needs no row of its own. Its batch's row holds its id (ids) and the span of its ids'
-- times (ids_at), and a lookup by id finds the batches whose span holds the id's time (the
-- GiST index) and whose ids hold the id; the newest such batch is the message's. txmq_ledger
-- keeps rows only for what a batch cannot say: messages staged in a transaction (no batch
-- yet), cancelled ones, and ids that carry no time (caller ids), which keep a row pointing at
-- their batch as in layout 2. id_at is the time of a row's id (NULL when it carries none). The
-- rows of layout 2 stay valid: each points at its batch.
ALTER TABLE {{schema}}.txmq_ledger_states ADD COLUMN ids_at tstzrange;
ALTER TABLE {{schema}}.txmq_ledger ADD COLUMN id_at timestamptz;
CREATE INDEX txmq_ledger_states_ids_at ON {{schema}}.txmq_ledger_states USING gist (ids_at);
-- Listings walk the batches of a queue by publish time, as they walk the rows.
CREATE INDEX txmq_ledger_states_queue_published ON {{schema}}.txmq_ledger_states (queue, published_at);
-- A batch's ids are written once and compressed (TOAST); lz4 compresses them in about half the
-- time of the default pglz. A server built without lz4 keeps pglz.
DO $$
BEGIN
	EXECUTE 'ALTER TABLE {{schema}}.txmq_ledger_states ALTER COLUMN ids SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
	NULL;
END
$$;
