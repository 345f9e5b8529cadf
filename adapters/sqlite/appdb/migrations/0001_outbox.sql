-- txmq outbox and dead letters in the app's SQLite database file.
--
-- Times are INTEGER microseconds since the Unix epoch on the machine's clock (every process on
-- a SQLite file runs on the machine that holds it, so they share one clock). Row ids are
-- AUTOINCREMENT: never reused, so they follow the order in which rows were inserted (an ordered
-- queue's keys are published in id order).
CREATE TABLE IF NOT EXISTS txmq_outbox (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	queue           TEXT    NOT NULL,
	batch_id        TEXT    NOT NULL,
	body            BLOB    NOT NULL,
	not_before      INTEGER NULL,
	exclusive       INTEGER NOT NULL DEFAULT 0,
	order_key       TEXT    NULL,
	created_at      INTEGER NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NULL,
	last_error      TEXT    NULL,
	-- A claimed row (a relay or sweep page publishing it outside the write lock) carries the
	-- claim's token, its next_attempt_at is the claim's lease end, and claim_next keeps the
	-- value it had, put back when the claim ends without publishing the row.
	claim_token     INTEGER NULL,
	claim_next      INTEGER NULL
);

-- The relay and the sweep: due rows by next-attempt time, unscheduled rows by age; both then
-- go by id.
CREATE INDEX IF NOT EXISTS txmq_outbox_due_idx ON txmq_outbox (next_attempt_at, id);
CREATE INDEX IF NOT EXISTS txmq_outbox_created_idx ON txmq_outbox (created_at, id) WHERE next_attempt_at IS NULL;
CREATE INDEX IF NOT EXISTS txmq_outbox_order_key_idx ON txmq_outbox (queue, order_key, id) WHERE order_key IS NOT NULL;

-- Dead letters: batches core gave up on, replayable. One row per batch (queue, non-empty batch
-- id). replaying_until is the end of a replay in progress (the row is published outside the
-- write lock, so that a backend in the same file can write), which keeps a second replay away.
CREATE TABLE IF NOT EXISTS txmq_dead_letters (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	queue           TEXT    NOT NULL,
	batch_id        TEXT    NOT NULL DEFAULT '',
	body            BLOB    NOT NULL,
	exclusive       INTEGER NOT NULL DEFAULT 0,
	reason          TEXT    NOT NULL,
	last_error      TEXT    NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	messages        INTEGER NOT NULL DEFAULT 0,
	first_failed_at INTEGER NOT NULL,
	last_failed_at  INTEGER NOT NULL,
	replay_count    INTEGER NOT NULL DEFAULT 0,
	replayed_at     INTEGER NULL,
	replaying_until INTEGER NULL
);

CREATE INDEX IF NOT EXISTS txmq_dead_letters_queue_idx ON txmq_dead_letters (queue, id);
CREATE UNIQUE INDEX IF NOT EXISTS txmq_dead_letters_batch_idx ON txmq_dead_letters (queue, batch_id) WHERE batch_id <> '';
