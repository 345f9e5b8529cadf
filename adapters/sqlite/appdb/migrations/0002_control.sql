-- txmq control tables in the app's SQLite database file, as in PostgreSQL's schema: the
-- queues' pause marks, the schedules' claimed ticks, the shared rate buckets and the nodes'
-- heartbeats. Times are INTEGER microseconds since the Unix epoch on the machine's clock, as
-- in 0001.

-- Paused queues: a queue listed here is not started by any node of the app.
CREATE TABLE IF NOT EXISTS txmq_paused (
	queue     TEXT    NOT NULL PRIMARY KEY,
	paused_at INTEGER NOT NULL,
	paused_by TEXT    NOT NULL
);

-- Claimed schedule ticks: the primary key admits each tick of a schedule once, whatever the
-- number of processes claiming it (pruned after a day by the claimers).
CREATE TABLE IF NOT EXISTS txmq_schedule_ticks (
	schedule   TEXT    NOT NULL,
	tick       INTEGER NOT NULL,
	claimed_at INTEGER NOT NULL,
	PRIMARY KEY (schedule, tick)
);

-- Per schedule: its queue, last claimed tick and next tick (for operators and RunMissedOnce).
CREATE TABLE IF NOT EXISTS txmq_schedules (
	schedule   TEXT    NOT NULL PRIMARY KEY,
	queue      TEXT    NOT NULL,
	last_tick  INTEGER NOT NULL,
	next_tick  INTEGER NULL,
	updated_at INTEGER NOT NULL
);

-- One token bucket per rate-limited queue, shared by every process on the file.
CREATE TABLE IF NOT EXISTS txmq_rate_buckets (
	queue      TEXT    NOT NULL PRIMARY KEY,
	tokens     REAL    NOT NULL,
	updated_at INTEGER NOT NULL
);

-- One heartbeat row per node; rows not seen for a day are pruned by the writers.
CREATE TABLE IF NOT EXISTS txmq_nodes (
	node       TEXT    NOT NULL PRIMARY KEY,
	queues     BLOB    NOT NULL,
	version    TEXT    NOT NULL DEFAULT '',
	started_at INTEGER NOT NULL,
	every_ms   INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	stopped    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS txmq_nodes_last_seen_idx ON txmq_nodes (last_seen);
