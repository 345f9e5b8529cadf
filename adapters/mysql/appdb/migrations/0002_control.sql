-- txmq control tables in the app's MySQL/MariaDB database, as in PostgreSQL's schema: the
-- queues' pause marks, the schedules' claimed ticks, the shared rate buckets and the nodes'
-- heartbeats. Times are BIGINT microseconds since the Unix epoch on the database's clock
-- (UTC_TIMESTAMP(6)), as in 0001. Each statement is re-runnable (IF NOT EXISTS).

-- Paused queues: a queue listed here is not started by any node of the app.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_paused (
	queue     VARBINARY(255) NOT NULL,
	paused_at BIGINT         NOT NULL,
	paused_by TEXT           NOT NULL,
	PRIMARY KEY (queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Claimed schedule ticks: the primary key admits each tick of a schedule once, whatever the
-- number of nodes claiming it (pruned after a day by the claimers).
CREATE TABLE IF NOT EXISTS {{schema}}txmq_schedule_ticks (
	schedule   VARBINARY(255) NOT NULL,
	tick       BIGINT         NOT NULL,
	claimed_at BIGINT         NOT NULL,
	PRIMARY KEY (schedule, tick)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- Per schedule: its queue, last claimed tick and next tick (for operators and RunMissedOnce).
CREATE TABLE IF NOT EXISTS {{schema}}txmq_schedules (
	schedule   VARBINARY(255) NOT NULL,
	queue      VARBINARY(255) NOT NULL,
	last_tick  BIGINT         NOT NULL,
	next_tick  BIGINT         NULL,
	updated_at BIGINT         NOT NULL,
	PRIMARY KEY (schedule)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- One token bucket per rate-limited queue, shared by every node of the app.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_rate_buckets (
	queue      VARBINARY(255) NOT NULL,
	tokens     DOUBLE         NOT NULL,
	last_take  INT            NOT NULL DEFAULT 0,
	updated_at BIGINT         NOT NULL,
	PRIMARY KEY (queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- One heartbeat row per node; rows not seen for a day are pruned by the writers.
CREATE TABLE IF NOT EXISTS {{schema}}txmq_nodes (
	node       VARBINARY(255) NOT NULL,
	queues     LONGBLOB       NOT NULL,
	version    VARCHAR(255)   NOT NULL DEFAULT '',
	started_at BIGINT         NOT NULL,
	every_ms   BIGINT         NOT NULL,
	last_seen  BIGINT         NOT NULL,
	stopped    BOOLEAN        NOT NULL DEFAULT FALSE,
	PRIMARY KEY (node),
	KEY txmq_nodes_last_seen_idx (last_seen)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
