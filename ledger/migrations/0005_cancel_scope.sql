-- txmq ledger: a cancel applies to the messages it found, never to a later publish that reuses
-- the id. A cancel records on the message's row when it was made (cancel_at: the cancelling
-- process's time, and never before the message's last recorded event) and the batch that held
-- the message then (cancel_batch; '' for a message staged in a transaction, not yet in a
-- batch). A node leaves a message out of a batch when that batch is the one the cancel found,
-- or was created no later than cancel_at; any other batch holding the id is a later publish,
-- which runs. The row's state and batch follow such a later publish (package ledger, write.go
-- and query.go); the cancel stays on the row. Nodes read new cancels by cancel_at.
ALTER TABLE {{schema}}.txmq_ledger ADD COLUMN cancel_at timestamptz, ADD COLUMN cancel_batch text;
-- The cancels made before: each applied to every publish of its id; now it applies to the batch
-- it found and to those created no later than it.
UPDATE {{schema}}.txmq_ledger SET cancel_at = updated_at, cancel_batch = batch_id WHERE state = 'cancelled';
CREATE INDEX txmq_ledger_cancels ON {{schema}}.txmq_ledger (cancel_at) WHERE cancel_at IS NOT NULL;
