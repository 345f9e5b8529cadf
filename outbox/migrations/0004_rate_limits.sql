-- txmq rate limits: one token bucket per rate-limited queue, shared by every node of the app.
CREATE TABLE {{schema}}.txmq_rate_buckets (
	queue      text             PRIMARY KEY,
	tokens     double precision NOT NULL,
	last_take  integer          NOT NULL DEFAULT 0,
	updated_at timestamptz      NOT NULL DEFAULT now()
);
