-- txmq outbox: batches waiting to be published to the backend.
CREATE TABLE {{schema}}.txmq_outbox (
	id              bigserial   PRIMARY KEY,
	queue           text        NOT NULL,
	batch_id        text        NOT NULL,
	body            bytea       NOT NULL,
	not_before      timestamptz NULL,      -- OutgoingBatch.NotBefore (delayed messages)
	exclusive       boolean     NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL DEFAULT now(),
	attempts        int         NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NULL,      -- NULL: due after the recovery age
	last_error      text        NULL
);

-- The relay and the sweep: due rows, and unscheduled rows by age; both then walk by id.
CREATE INDEX txmq_outbox_due_idx ON {{schema}}.txmq_outbox (next_attempt_at, id)
	WHERE next_attempt_at IS NOT NULL;
CREATE INDEX txmq_outbox_unscheduled_idx ON {{schema}}.txmq_outbox (created_at, id)
	WHERE next_attempt_at IS NULL;
CREATE INDEX txmq_outbox_queue_idx ON {{schema}}.txmq_outbox (queue, id);

-- txmq dead letters: batches core gave up on, replayable.
CREATE TABLE {{schema}}.txmq_dead_letters (
	id              bigserial   PRIMARY KEY,
	queue           text        NOT NULL,
	batch_id        text        NOT NULL DEFAULT '',
	body            bytea       NOT NULL,
	exclusive       boolean     NOT NULL DEFAULT false,
	reason          text        NOT NULL,
	last_error      text        NOT NULL DEFAULT '',
	attempts        int         NOT NULL DEFAULT 0,
	messages        int         NOT NULL DEFAULT 0,
	first_failed_at timestamptz NOT NULL DEFAULT now(),
	last_failed_at  timestamptz NOT NULL DEFAULT now(),
	replay_count    int         NOT NULL DEFAULT 0,
	replayed_at     timestamptz NULL
);

CREATE INDEX txmq_dead_letters_queue_idx ON {{schema}}.txmq_dead_letters (queue, id);
-- One row per batch: a batch dead-lettered again (a duplicate copy, or after a replay) updates it.
CREATE UNIQUE INDEX txmq_dead_letters_batch_idx ON {{schema}}.txmq_dead_letters (queue, batch_id)
	WHERE batch_id <> '';
