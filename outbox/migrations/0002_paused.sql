-- txmq paused queues: a queue listed here is not started by any node of the app (pause/resume).
CREATE TABLE {{schema}}.txmq_paused (
	queue     text        PRIMARY KEY,
	paused_at timestamptz NOT NULL DEFAULT now(),
	paused_by text        NOT NULL DEFAULT ''
);
