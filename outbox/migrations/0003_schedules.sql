-- txmq schedules: each claimed tick of a schedule (one row per tick, so that a tick is
-- published once cluster-wide; pruned after a day), and per schedule its last and next tick.
CREATE TABLE {{schema}}.txmq_schedule_ticks (
	schedule   text        NOT NULL,
	tick       timestamptz NOT NULL,
	claimed_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (schedule, tick)
);

CREATE TABLE {{schema}}.txmq_schedules (
	schedule   text        PRIMARY KEY,
	queue      text        NOT NULL,
	last_tick  timestamptz NOT NULL,
	next_tick  timestamptz NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
