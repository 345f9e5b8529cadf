package sqljobs

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// statements holds the SQL of one schema, rendered once by New.
type statements struct {
	publish, publishMany, claim, extend, ack, retry, depths string
	heartbeat                                               string
	claimPrio, claimFair, claimFairPrio                     string
	claimLimited, claimPrioLimited, claimFairLimited        string
	claimFairPrioLimited                                    string
	reapQueues, reapPick, reapDelete, reapCount             string
	publishKeyed, ackKeyed, holdsKey                        string
	inspectQueues, inspectPage, inspectFind                 string
	replaceBody, removeUnclaimed, expedite                  string
	holdIDs, pruneIDs                                       string
	uniqueTake, uniqueHolder, uniqueMove, uniqueReplace     string
	pruneUnique                                             string
	heartbeatQueues                                         string
}

// render substitutes the quoted schema into every statement. {{s}} is the quoted schema;
// {{seq}} the lease-token sequence as a regclass literal.
func render(schema string) statements {
	q := pgx.Identifier{schema}.Sanitize()
	r := strings.NewReplacer("{{s}}", q, "{{seq}}", "'"+q+".txmq_jobs_lease_seq'", "{{idseq}}", "'"+q+".txmq_jobs_id_seq'")
	return statements{
		publish:     r.Replace(sqlPublish),
		publishMany: r.Replace(sqlPublishMany),
		claim:       r.Replace(sqlClaim),
		claimPrio:   r.Replace(sqlClaimPrio),
		claimFair:   r.Replace(sqlClaimFair),

		claimFairPrio:        r.Replace(sqlClaimFairPrio),
		claimFairPrioLimited: r.Replace(sqlClaimFairPrioLimited),

		claimLimited:     r.Replace(sqlClaimLimited),
		claimPrioLimited: r.Replace(sqlClaimPrioLimited),
		claimFairLimited: r.Replace(sqlClaimFairLimited),

		extend:     r.Replace(sqlExtend),
		ack:        r.Replace(sqlAck),
		retry:      r.Replace(sqlRetry),
		depths:     r.Replace(sqlDepths),
		heartbeat:  r.Replace(sqlHeartbeat),
		reapQueues: r.Replace(sqlReapQueues),
		reapPick:   r.Replace(sqlReapPick),
		reapDelete: r.Replace(sqlReapDelete),
		reapCount:  r.Replace(sqlReapCount),

		publishKeyed: r.Replace(sqlPublishKeyed),
		ackKeyed:     r.Replace(sqlAckKeyed),
		holdsKey:     r.Replace(sqlHoldsKey),

		inspectQueues:   r.Replace(sqlInspectQueues),
		inspectPage:     r.Replace(sqlInspectPage),
		inspectFind:     r.Replace(sqlInspectFind),
		replaceBody:     r.Replace(sqlReplaceBody),
		removeUnclaimed: r.Replace(sqlRemoveUnclaimed),
		expedite:        r.Replace(sqlExpedite),

		holdIDs:  r.Replace(sqlHoldIDs),
		pruneIDs: r.Replace(sqlPruneIDs),

		uniqueTake:    r.Replace(sqlUniqueTake),
		uniqueHolder:  r.Replace(sqlUniqueHolder),
		uniqueMove:    r.Replace(sqlUniqueMove),
		uniqueReplace: r.Replace(sqlUniqueReplace),
		pruneUnique:   r.Replace(sqlPruneUnique),

		heartbeatQueues: r.Replace(sqlHeartbeatQueues),
	}
}

// sqlPublish stores one batch and wakes listening nodes (NOTIFY is sent at commit). A delayed
// batch notifies too, so a waiting Fetch re-arms its timer for the new due time.
// $1 queue, $2 batch id, $3 body, $4 delay in microseconds (0 for now), $5 messages, $6 channel,
// $7 priority, $8 lead in microseconds (see priority.go; 0 and 0 on other queues), $9 the
// fairness key (see fair.go; ” on other queues).
// The delay is added to the database's own clock (clock_timestamp(), which is never before the
// now() that claims compare with), never to the publisher's: one clock for both sides.
const sqlPublish = `
WITH i AS (
	INSERT INTO {{s}}.txmq_jobs (queue, batch_id, body, run_at, messages, priority, lead_us, fair_key)
	VALUES ($1, $2, $3, CASE WHEN $4::bigint > 0 THEN clock_timestamp() + $4::bigint * interval '1 microsecond' ELSE now() END, $5, $7, $8, $9)
	RETURNING queue
)
SELECT pg_notify($6, queue) FROM i`

// sqlPublishMany is sqlPublish for a round of plain publishes (see publishGroup): one row per
// batch from the aligned arrays, each scheduled as sqlPublish schedules its one, and one
// NOTIFY per distinct queue rather than per row. Rows go in in the arrays' order (their ids
// too), and share the transaction's now(). $1 queues, $2 batch ids, $3 bodies, $4 delays in
// microseconds, $5 messages, $6 priorities, $7 leads in microseconds, $8 fairness keys,
// $9 channel.
const sqlPublishMany = `
WITH i AS (
	INSERT INTO {{s}}.txmq_jobs (queue, batch_id, body, run_at, messages, priority, lead_us, fair_key)
	SELECT r.q, r.b, r.body, CASE WHEN r.delay > 0 THEN clock_timestamp() + r.delay * interval '1 microsecond' ELSE now() END,
		r.msgs, r.prio, r.lead, r.fk
	FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[], $5::int[], $6::smallint[], $7::bigint[], $8::text[])
		WITH ORDINALITY AS r(q, b, body, delay, msgs, prio, lead, fk, n)
	ORDER BY r.n
	RETURNING queue
)
SELECT pg_notify($9, q.queue) FROM (SELECT DISTINCT queue FROM i) q`

// sqlClaim claims due batches for every requested queue in one statement:
//
//   - req: the queues with their limits (how many rows each scan may lock, see claimParamsOf)
//     and Exclusive flags, sorted by queue so that exclusive locks are always taken in the same
//     order;
//   - pick: per queue, an index range scan of (queue, run_at) over run_at <= now(), locked
//     with FOR UPDATE SKIP LOCKED so concurrent claimers never wait on each other's rows;
//   - cand: the queues share one budget ($4, the request's Max), taken round-robin (every
//     queue's first pick, then every second, ...);
//   - lk: for an Exclusive queue, the lock row is inserted, or taken over when its lease ran
//     out; ON CONFLICT serialises concurrent claimers on the queue's row, so one wins;
//   - claimed: the rows are leased: a new token per row (sqlAck relies on no two rows ever
//     holding the same token), deliveries+1, run_at = the lease's end; the
//     rows are found by primary key (id = ANY(ARRAY(...))), never by a join the planner could
//     turn into a scan of the whole table;
//   - when nothing was claimed, a last row (id NULL) carries the seconds until the next row of
//     these queues becomes claimable (a delayed batch or a lease running out; a held row of an
//     ordered key, at 'infinity', waits for an ack instead), for the waiting Fetch's timer (a
//     Fetch that claimed something returns at once, so that probe is skipped).
//
// A row of an ordered queue is claimable only as the first of its key (see sqlPublishKeyed):
// the claim needs no guard of its own and stays one range scan per queue.
//
// $1 queues, $2 limits, $3 exclusive flags, $4 budget, $5 node, $6 lease in µs,
// $7 the transaction's synchronous_commit ('off', or NULL for the session's; see syncCommit).
const sqlClaim = `
WITH req AS (
	SELECT r.q, r.lim, r.excl FROM unnest($1::text[], $2::int[], $3::bool[]) AS r(q, lim, excl)
	WHERE set_config('synchronous_commit', COALESCE($7::text, current_setting('synchronous_commit')), true) IS NOT NULL
),
pick AS MATERIALIZED (
	SELECT c.id, r.q, r.excl,
		row_number() OVER (PARTITION BY r.q ORDER BY c.run_at, c.id) AS rn
	FROM req r
	CROSS JOIN LATERAL (
		SELECT j.id, j.run_at FROM {{s}}.txmq_jobs j
		WHERE j.queue = r.q AND j.run_at <= now()
		ORDER BY j.run_at
		LIMIT r.lim
		FOR UPDATE SKIP LOCKED
	) c
),
cand AS MATERIALIZED (
	SELECT id, q, excl FROM pick ORDER BY rn, id LIMIT $4::int
),
lk AS (
	INSERT INTO {{s}}.txmq_jobs_exclusive AS x (queue, job_id, lease_until)
	SELECT q, id, now() + $6::bigint * interval '1 microsecond' FROM cand WHERE excl ORDER BY q
	ON CONFLICT (queue) DO UPDATE SET job_id = EXCLUDED.job_id, lease_until = EXCLUDED.lease_until
	WHERE x.lease_until <= now()
	RETURNING x.job_id
),
claimed AS (
	UPDATE {{s}}.txmq_jobs j
	SET deliveries = j.deliveries + 1,
		lease_token = nextval({{seq}}),
		lease_owner = $5,
		run_at = now() + $6::bigint * interval '1 microsecond'
	WHERE j.id = ANY(ARRAY(SELECT id FROM cand WHERE NOT excl UNION ALL SELECT job_id FROM lk))
	RETURNING j.id, j.queue, j.batch_id, j.body, j.deliveries, j.lease_token, j.run_at, j.order_key
)
SELECT id, queue, batch_id, body, deliveries, lease_token, run_at, NULL::float8, order_key FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, (
	SELECT extract(epoch FROM min(n.run_at) - now())::float8
	FROM req r
	CROSS JOIN LATERAL (
		SELECT j.run_at FROM {{s}}.txmq_jobs j
		WHERE j.queue = r.q AND j.run_at > now() AND j.run_at < 'infinity'
		ORDER BY j.run_at LIMIT 1
	) n
), NULL
WHERE NOT EXISTS (SELECT FROM claimed)`

// sqlExtend moves live leases' ends, and their exclusive locks' with them, for a group of
// claims in one statement (see group). A row comes back for each claim whose lease held.
// $1 ids, $2 tokens, $3 leases in µs, $4 synchronous_commit (see syncCommit).
const sqlExtend = `
WITH r AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS r(id, token, lease)
	WHERE set_config('synchronous_commit', COALESCE($4::text, current_setting('synchronous_commit')), true) IS NOT NULL
),
j AS (
	UPDATE {{s}}.txmq_jobs j SET run_at = now() + r.lease * interval '1 microsecond'
	FROM r
	WHERE j.id = ANY($1::bigint[]) AND j.id = r.id AND j.lease_token = r.token AND j.run_at > now()
	RETURNING j.id, j.lease_token, j.queue, j.run_at
),
l AS (
	UPDATE {{s}}.txmq_jobs_exclusive x SET lease_until = j.run_at
	FROM j WHERE x.queue = j.queue AND x.job_id = j.id
	RETURNING 1
)
SELECT id, lease_token, run_at FROM j`

// sqlAck deletes batches under live leases (Ack and Drop) for a group of claims in one
// statement (see group), releases their exclusive locks and, when there were any, wakes nodes
// waiting for those queues. A row comes back for each claim whose lease held.
//
// A row is deleted when its id is among the ids and its token among the tokens, not as the
// pair of one claim, which is the same: every token is a value of the sequence given to one
// row by one claim (sqlClaim), so a row holding one of the tokens holds the one its own claim
// got. That spares the join of the rows with the pairs (a nested loop comparing every row
// with every pair: it took half the statement's time at 28 claims a group).
// $1 ids, $2 tokens, $3 channel, $4 synchronous_commit (see syncCommit).
const sqlAck = `
WITH j AS (
	DELETE FROM {{s}}.txmq_jobs j
	WHERE j.id = ANY($1::bigint[]) AND j.lease_token = ANY($2::bigint[]) AND j.run_at > now()
		AND (SELECT set_config('synchronous_commit', COALESCE($4::text, current_setting('synchronous_commit')), true)) IS NOT NULL
	RETURNING j.id, j.lease_token, j.queue
),
l AS (
	DELETE FROM {{s}}.txmq_jobs_exclusive x USING j WHERE x.queue = j.queue AND x.job_id = j.id
	RETURNING x.queue
)
SELECT j.id, j.lease_token, (SELECT count(*) FROM (SELECT pg_notify($3, l.queue) FROM l) n) FROM j`

// sqlRetry releases a live lease: the batch is claimable again after the delay, with the new
// body and deliveries restarted (a rewrite), or, for a NULL body, as it was (in place).
// $1 id, $2 token, $3 body or NULL, $4 delay in µs, $5 channel.
const sqlRetry = `
WITH j AS (
	UPDATE {{s}}.txmq_jobs
	SET body = COALESCE($3::bytea, body),
		deliveries = CASE WHEN $3::bytea IS NULL THEN deliveries ELSE 0 END,
		run_at = now() + $4::bigint * interval '1 microsecond',
		lease_token = NULL, lease_owner = NULL
	WHERE id = $1 AND lease_token = $2 AND run_at > now()
	RETURNING id, queue
),
l AS (
	DELETE FROM {{s}}.txmq_jobs_exclusive x USING j WHERE x.queue = j.queue AND x.job_id = j.id
	RETURNING x.queue
)
SELECT j.id, pg_notify($5, j.queue) FROM j`

// sqlDepths counts each named queue's rows by derived state, one index-only range scan of
// (queue, run_at) INCLUDE (lease_token) per queue: its cost grows with the queue's batches,
// not the table's. oldest is the smallest run_at among the ready rows (an expired lease's
// run_at is its lease end), NULL when none is ready. $1 queues.
const sqlDepths = `
SELECT r.q, c.ready, c.inflight, c.delayed, c.oldest
FROM unnest($1::text[]) AS r(q)
CROSS JOIN LATERAL (
	SELECT count(*) FILTER (WHERE j.run_at <= now()) AS ready,
		min(j.run_at) FILTER (WHERE j.run_at <= now()) AS oldest,
		count(*) FILTER (WHERE j.lease_token IS NOT NULL AND j.run_at > now()) AS inflight,
		count(*) FILTER (WHERE j.lease_token IS NULL AND j.run_at > now()) AS delayed
	FROM {{s}}.txmq_jobs j WHERE j.queue = r.q
) c`

// sqlHeartbeat records that the queues were fetched now. $1 queues.
const sqlHeartbeat = `
INSERT INTO {{s}}.txmq_jobs_queues (queue, last_fetch_at)
SELECT q, now() FROM unnest($1::text[]) AS r(q) ORDER BY q
ON CONFLICT (queue) DO UPDATE SET last_fetch_at = now()`

// sqlReapQueues lists the queues that have batches and no fetch heartbeat younger than $1 µs:
// a skip scan over the claim index finds the distinct queues in O(queues · log rows).
const sqlReapQueues = `
WITH RECURSIVE qs(queue) AS (
	(SELECT queue FROM {{s}}.txmq_jobs ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM {{s}}.txmq_jobs j WHERE j.queue > qs.queue ORDER BY j.queue LIMIT 1)
	FROM qs WHERE qs.queue IS NOT NULL
)
SELECT qs.queue, h.last_fetch_at FROM qs
LEFT JOIN {{s}}.txmq_jobs_queues h ON h.queue = qs.queue
WHERE qs.queue IS NOT NULL
	AND (h.last_fetch_at IS NULL OR h.last_fetch_at < now() - $1::bigint * interval '1 microsecond')`

// sqlReapPick locks up to $3 batches of queue $1 older than $2 µs that are not in flight, in
// (queue, run_at) index order.
const sqlReapPick = `
SELECT id, batch_id, body, deliveries, messages FROM {{s}}.txmq_jobs
WHERE queue = $1 AND created_at < now() - $2::bigint * interval '1 microsecond'
	AND (lease_token IS NULL OR run_at <= now())
ORDER BY run_at LIMIT $3
FOR UPDATE SKIP LOCKED`

// sqlReapDelete deletes reaped batches, and makes the next row of each ordering key whose
// first row it deleted due (see sqlAckKeyed). $1 ids.
const sqlReapDelete = `
WITH d AS (
	DELETE FROM {{s}}.txmq_jobs WHERE id = ANY($1::bigint[]) RETURNING id, queue, order_key
),
nx AS (
	SELECT n.id FROM (SELECT DISTINCT queue, order_key FROM d WHERE order_key IS NOT NULL) k
	CROSS JOIN LATERAL (
		SELECT j.id FROM {{s}}.txmq_jobs j
		WHERE j.queue = k.queue AND j.order_key = k.order_key AND j.id <> ALL($1::bigint[])
		ORDER BY j.id LIMIT 1
	) n
)
UPDATE {{s}}.txmq_jobs j SET run_at = COALESCE(j.due_at, now())
WHERE j.id = ANY(ARRAY(SELECT id FROM nx)) AND j.run_at = 'infinity'`

// sqlLockKey serialises the statements of one ordering key (publish, ack, drop) for the rest
// of their implicit transaction, so that the next statement's snapshot sees every row of the
// key that an earlier one committed. Sent between the plan guard and the statement, in one
// round trip. $1 queue, $2 key; a hash collision only serialises two keys.
const sqlLockKey = `SELECT pg_advisory_xact_lock(hashtextextended($1::text || '/' || $2::text, 7310))`

// sqlLockKeys is sqlLockKey for the keys of a group of acks and drops, taken in hash order.
// A key has at most one batch in flight, so two groups never wait for each other's keys.
// $1 queues, $2 keys.
const sqlLockKeys = `
SELECT count(pg_advisory_xact_lock(s.h)) FROM (
	SELECT DISTINCT hashtextextended(r.q || '/' || r.k, 7310) AS h
	FROM unnest($1::text[], $2::text[]) AS r(q, k) ORDER BY 1
) s`

// sqlPublishKeyed stores one batch of an ordered queue, after sqlLockKey: the first row of its
// key is scheduled as any row; a row behind others of its key is held (run_at 'infinity',
// counted as delayed) with its own due time in due_at, until the rows before it are gone.
// $1-$6 as sqlPublish, $7 the key, $8 priority, $9 lead in microseconds, $10 the fairness key.
const sqlPublishKeyed = `
WITH h AS (
	SELECT EXISTS (SELECT 1 FROM {{s}}.txmq_jobs j WHERE j.queue = $1 AND j.order_key = $7) AS held,
		CASE WHEN $4::bigint > 0 THEN clock_timestamp() + $4::bigint * interval '1 microsecond' END AS due
),
i AS (
	INSERT INTO {{s}}.txmq_jobs (queue, batch_id, body, run_at, messages, order_key, due_at, priority, lead_us, fair_key)
	SELECT $1, $2, $3, CASE WHEN h.held THEN 'infinity'::timestamptz ELSE COALESCE(h.due, now()) END, $5, $7, h.due, $8, $9, $10
	FROM h
	RETURNING queue
)
SELECT pg_notify($6, queue) FROM i`

// sqlHoldsKey reports whether the table holds any row of one queue and ordering key (ready,
// delayed, held or in flight): core.KeyHolder, for a drain whose old backend this is.
// $1 queue, $2 key.
const sqlHoldsKey = `SELECT EXISTS (SELECT 1 FROM {{s}}.txmq_jobs j WHERE j.queue = $1 AND j.order_key = $2)`

// sqlAckKeyed deletes batches of ordered queues under live leases (Ack and Drop) for a group
// of claims, after sqlLockKeys, releases their Exclusive locks, and makes the next row of each
// key due (its own due time, or now), waking waiting nodes. A row comes back for each claim
// whose lease held; ids and tokens are matched as in sqlAck. $1 ids, $2 tokens, $3 channel.
const sqlAckKeyed = `
WITH d AS (
	DELETE FROM {{s}}.txmq_jobs j
	WHERE j.id = ANY($1::bigint[]) AND j.lease_token = ANY($2::bigint[]) AND j.run_at > now()
	RETURNING j.id, j.lease_token, j.queue, j.order_key
),
l AS (
	DELETE FROM {{s}}.txmq_jobs_exclusive x USING d WHERE x.queue = d.queue AND x.job_id = d.id
	RETURNING 1
),
nx AS (
	SELECT n.id FROM d CROSS JOIN LATERAL (
		SELECT j.id FROM {{s}}.txmq_jobs j
		WHERE j.queue = d.queue AND j.order_key = d.order_key AND j.id > d.id
		ORDER BY j.id LIMIT 1
	) n
),
p AS (
	UPDATE {{s}}.txmq_jobs j SET run_at = COALESCE(j.due_at, now())
	WHERE j.id = ANY(ARRAY(SELECT id FROM nx)) AND j.run_at = 'infinity'
	RETURNING 1
)
SELECT d.id, d.lease_token, (SELECT count(*) FROM (SELECT pg_notify($3, qs.q) FROM (SELECT DISTINCT queue AS q FROM d) qs) n) FROM d`

// sqlReapCount counts the batches of queue $1 older than $2 µs that are not in flight.
const sqlReapCount = `
SELECT count(*) FROM {{s}}.txmq_jobs
WHERE queue = $1 AND created_at < now() - $2::bigint * interval '1 microsecond'
	AND (lease_token IS NULL OR run_at <= now())`
