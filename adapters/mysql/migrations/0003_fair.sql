-- Fair share by key (core.FairSharer): fair_key is the batch's fairness key ('' on queues that
-- are not fair, and the empty key of a fair queue). The claim of a fair queue lists the keys
-- with ready rows through (queue, fair_key, run_at) (a loose index scan: one probe per key)
-- and reads each key's first ready rows the same way; txmq_jobs_fair keeps, per fair queue,
-- the last key served (the turn), its row lock serialising the queue's fair claims.
ALTER TABLE {{schema}}txmq_jobs
	ADD COLUMN fair_key VARBINARY(255) NOT NULL DEFAULT '',
	ADD KEY txmq_jobs_fair_idx (queue, fair_key, run_at, id);

CREATE TABLE IF NOT EXISTS {{schema}}txmq_jobs_fair (
	queue    VARBINARY(255) NOT NULL,
	last_key VARBINARY(255) NOT NULL DEFAULT '',
	PRIMARY KEY (queue)
) ENGINE = InnoDB;
