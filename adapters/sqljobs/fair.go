package sqljobs

import (
	"strconv"
	"strings"

	"github.com/txmq/txmq/core"
)

// Fair share by key (core.FairSharer). A batch's fairness key (core.OutgoingBatch.FairKey) is
// stored with its row (column fair_key, migration 0006; '' on other queues) and keeps through
// every later change of the row, as the priority does. The claim of a fair queue
// (core.QueueSlots.Fair) runs sqlClaimFair, one statement per fair queue of the request:
//
//   - ring: the queue's distinct keys, walked from the key after the queue's last served one
//     (txmq_jobs_fair.last_key) to the last key, then from the first key up to it: a skip scan
//     of (queue, fair_key, run_at), one index probe per key, each key also probed for a ready
//     row (run_at <= now(): its first row by run_at). The walk stops once it found as many keys
//     with ready rows as the queue may claim, or after fairScanKeys keys.
//   - pick: up to the queue's limit of ready rows of each of those keys (one range scan each),
//     ranked by their rank within the key, then the key's place in the turn: a claim of one
//     takes the next key's first ready row, a claim of n one row of each of the next n keys.
//   - cand: the picked rows are locked by primary key (SKIP LOCKED, run_at rechecked): a row
//     another claimer took in between is left out, this claim returns fewer.
//   - turn: last_key becomes the key of the last row claimed, so the next claim starts after
//     it. Two claims at once may read the same last_key and serve the same key twice: the
//     bound of one batch per other key holds for claims that do not overlap.
//
// Within a key, rows go by run_at; on a fair queue that is also prioritized
// (core.QueueSlots.Prioritized: core.FairPrioritizer) by run_at minus lead, as on a
// prioritized queue (priority.go): the claim runs sqlClaimFairPrio, whose pick reads, for each
// key of the walk, its first ready rows by run_at (any priority, through the fair index) and
// the first ready rows of each priority 1..9 (through (queue, fair_key, priority, run_at)
// WHERE priority > 0, migration 0009), and ranks their union by run_at minus lead. Exact: a
// priority-0 row among the key's best n is among its first n by run_at, since every row due
// before it ranks ahead of it (its lead is 0, every other one's >= 0). The ring (which keys
// have ready rows, and whose turn it is) is the same walk: fairness comes first, a key's
// priorities never let it skip another key's turn.
//
// Cost: one more index entry per row (every row: the column is '' on other queues); a fair
// claim costs two index probes per key it walks (the next key and its first row) and one
// upsert of the turn row. A fair, prioritized claim costs nine more range scans per key it
// takes rows of, and an index entry per row with a priority above 0.

// fairScanKeys caps the keys one claim walks, so that a queue with very many keys of which
// few are ready bounds each claim; the turn still moves on past them at the next claim.
const fairScanKeys = 1000

// SharesFairly implements core.FairSharer: the jobs table shares claims fairly by key.
func (be *Backend) SharesFairly() error { return nil }

// SharesFairlyByPriority implements core.FairPrioritizer: within each key of a fair queue,
// the jobs table ranks rows by run_at minus lead (sqlClaimFairPrio).
func (be *Backend) SharesFairlyByPriority() error { return nil }

var (
	_ core.FairSharer      = (*Backend)(nil)
	_ core.FairPrioritizer = (*Backend)(nil)
)

// sqlClaimFair is sqlClaim for one fair queue ($1..$3 one-element arrays; the rest as
// sqlClaim's own); see the comment at the top of this file.
var sqlClaimFair = `
WITH RECURSIVE req AS (
	SELECT r.q, r.lim, r.excl FROM unnest($1::text[], $2::int[], $3::bool[]) AS r(q, lim, excl)
	WHERE set_config('synchronous_commit', COALESCE($7::text, current_setting('synchronous_commit')), true) IS NOT NULL
),
cur AS (
	SELECT r.q, greatest(r.lim, 1) AS lim, r.excl,
		COALESCE((SELECT f.last_key || chr(1) FROM {{s}}.txmq_jobs_fair f WHERE f.queue = r.q), '') COLLATE "C" AS lo
	FROM req r
),
ring(q, k, pos, found, lim, lo) AS (
	SELECT c.q, (SELECT j.fair_key FROM {{s}}.txmq_jobs j WHERE j.queue = c.q AND j.fair_key >= c.lo ORDER BY j.fair_key LIMIT 1),
		0, 0, c.lim, c.lo
	FROM cur c
	UNION ALL
	SELECT g.q, CASE
			WHEN g.k IS NULL AND g.pos < 0 THEN NULL
			WHEN g.k IS NULL THEN (SELECT j.fair_key FROM {{s}}.txmq_jobs j WHERE j.queue = g.q AND j.fair_key < g.lo ORDER BY j.fair_key LIMIT 1)
			ELSE (SELECT j.fair_key FROM {{s}}.txmq_jobs j WHERE j.queue = g.q AND j.fair_key > g.k
				AND (g.pos >= 0 OR j.fair_key < g.lo) ORDER BY j.fair_key LIMIT 1)
		END,
		CASE WHEN g.k IS NULL THEN -1 WHEN g.pos < 0 THEN g.pos - 1 ELSE g.pos + 1 END,
		g.found + CASE WHEN g.k IS NOT NULL AND EXISTS (SELECT 1 FROM {{s}}.txmq_jobs j WHERE j.queue = g.q AND j.fair_key = g.k AND j.run_at <= now()) THEN 1 ELSE 0 END,
		g.lim, g.lo
	FROM ring g
	WHERE (g.k IS NOT NULL OR g.pos >= 0) AND g.found < g.lim AND abs(g.pos) < ` + itoa(fairScanKeys) + `
),
pick AS MATERIALIZED (
	SELECT c.id, g.q, g.k, r.excl, r.lim,
		row_number() OVER (ORDER BY c.rn, CASE WHEN g.pos >= 0 THEN g.pos ELSE ` + itoa(2*fairScanKeys) + ` - g.pos END) AS rn
	FROM ring g
	JOIN req r ON r.q = g.q
	CROSS JOIN LATERAL (
		SELECT j.id, row_number() OVER (ORDER BY j.run_at, j.id) AS rn FROM (
			SELECT j.id, j.run_at FROM {{s}}.txmq_jobs j
			WHERE j.queue = g.q AND j.fair_key = g.k AND j.run_at <= now()
			ORDER BY j.run_at
			LIMIT r.lim
		) j
	) c
	WHERE g.k IS NOT NULL
),
cand AS MATERIALIZED (
	SELECT j.id, k.q, k.excl, k.k, k.rn FROM {{s}}.txmq_jobs j JOIN pick k ON k.id = j.id
	WHERE j.id = ANY(ARRAY(SELECT id FROM pick WHERE rn <= lim ORDER BY rn LIMIT $4::int)) AND j.run_at <= now()
	FOR UPDATE OF j SKIP LOCKED
),
` + fairTail()

// sqlClaimFairPrio is sqlClaimFair for one fair, prioritized queue: the pick of each key's
// rows takes the union of its first ready rows by run_at and the first ready rows of each
// priority 1..9, ranked by run_at minus lead (see the comment at the top of this file).
var sqlClaimFairPrio = replaceOnce(sqlClaimFair, `
		SELECT j.id, row_number() OVER (ORDER BY j.run_at, j.id) AS rn FROM (
			SELECT j.id, j.run_at FROM {{s}}.txmq_jobs j
			WHERE j.queue = g.q AND j.fair_key = g.k AND j.run_at <= now()
			ORDER BY j.run_at
			LIMIT r.lim
		) j`, `
		SELECT j.id, row_number() OVER (ORDER BY j.due, j.id) AS rn FROM (
			SELECT j.id, j.due FROM (
				SELECT j.id, j.run_at - j.lead_us * interval '1 microsecond' AS due FROM (
					SELECT j.id, j.run_at, j.lead_us FROM {{s}}.txmq_jobs j
					WHERE j.queue = g.q AND j.fair_key = g.k AND j.run_at <= now() ORDER BY j.run_at LIMIT r.lim
				) j
				UNION
				SELECT j.id, j.run_at - j.lead_us * interval '1 microsecond' FROM unnest(ARRAY[`+upperLevels()+`]::int[]) AS l(lvl)
				CROSS JOIN LATERAL (
					SELECT j.id, j.run_at, j.lead_us FROM {{s}}.txmq_jobs j
					WHERE j.queue = g.q AND j.fair_key = g.k AND j.priority > 0 AND j.priority = l.lvl AND j.run_at <= now() ORDER BY j.run_at LIMIT r.lim
				) j
			) j
			ORDER BY j.due, j.id
			LIMIT r.lim
		) j`)

func itoa(n int) string { return strconv.Itoa(n) }

// fairTail is sqlClaim's CTEs from lk on, with the turn's update after claimed.
func fairTail() string {
	tail := sqlClaim[claimTail():]
	const sel = "\nSELECT id, queue, batch_id, body, deliveries, lease_token, run_at, NULL::float8, order_key FROM claimed"
	i := strings.Index(tail, sel)
	if i < 0 {
		panic("sqljobs: sqlClaim's final SELECT changed; update sqlClaimFair")
	}
	return tail[:i] + `,
turn AS (
	INSERT INTO {{s}}.txmq_jobs_fair AS f (queue, last_key)
	SELECT t.q, t.k FROM (SELECT c.q, c.k FROM cand c WHERE c.id = ANY(ARRAY(SELECT id FROM claimed)) ORDER BY c.rn DESC LIMIT 1) t
	ON CONFLICT (queue) DO UPDATE SET last_key = EXCLUDED.last_key
	RETURNING 1
)` + tail[i:]
}
