-- txmq outbox and dead letters in the app's MySQL/MariaDB database.
--
-- Times are BIGINT microseconds since the Unix epoch on the database's clock (UTC_TIMESTAMP(6)),
-- so no session time zone or driver setting can shift them.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_outbox (
	id              BIGINT          NOT NULL AUTO_INCREMENT,
	queue           VARBINARY(255)  NOT NULL,
	batch_id        VARBINARY(255)  NOT NULL,
	body            LONGBLOB        NOT NULL,
	not_before      BIGINT          NULL,
	exclusive       BOOLEAN         NOT NULL DEFAULT FALSE,
	order_key       VARBINARY(255)  NULL,
	created_at      BIGINT          NOT NULL,
	attempts        INT             NOT NULL DEFAULT 0,
	next_attempt_at BIGINT          NULL,
	last_error      TEXT            NULL,
	PRIMARY KEY (id),
	-- The relay and the sweep: due rows, and unscheduled rows by age; both then walk by id.
	KEY txmq_outbox_due_idx (next_attempt_at, id),
	KEY txmq_outbox_created_idx (created_at, id),
	KEY txmq_outbox_order_key_idx (queue, order_key, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Dead letters: batches core gave up on, replayable. batch_key is batch_id, NULL when empty,
-- so that the unique key holds one row per batch (MySQL has no partial index).
CREATE TABLE IF NOT EXISTS {{schema}}txmq_dead_letters (
	id              BIGINT          NOT NULL AUTO_INCREMENT,
	queue           VARBINARY(255)  NOT NULL,
	batch_id        VARBINARY(255)  NOT NULL DEFAULT '',
	batch_key       VARBINARY(255)  AS (NULLIF(batch_id, '')) STORED,
	body            LONGBLOB        NOT NULL,
	exclusive       BOOLEAN         NOT NULL DEFAULT FALSE,
	reason          VARCHAR(64)     NOT NULL,
	last_error      MEDIUMTEXT      NOT NULL,
	attempts        INT             NOT NULL DEFAULT 0,
	messages        INT             NOT NULL DEFAULT 0,
	first_failed_at BIGINT          NOT NULL,
	last_failed_at  BIGINT          NOT NULL,
	replay_count    INT             NOT NULL DEFAULT 0,
	replayed_at     BIGINT          NULL,
	PRIMARY KEY (id),
	KEY txmq_dead_letters_queue_idx (queue, id),
	UNIQUE KEY txmq_dead_letters_batch_idx (queue, batch_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
