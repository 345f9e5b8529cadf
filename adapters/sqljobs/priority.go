package sqljobs

import (
	"strconv"
	"strings"

	"github.com/txmq/txmq/core"
)

// Priorities (core.Prioritizer). A batch's priority and lead (core.OutgoingBatch.Priority and
// Lead, its priority times its queue's aging step) are stored with its row (columns priority
// and lead_us, migration 0005), and keep through every later change of the row: run_at moves
// (a retry, a lease, an expired lease, the head of an ordering key), the columns do not.
//
// A claim that asks for a prioritized queue (core.QueueSlots.Prioritized) runs sqlClaimPrio:
// for such a queue it reads, without locking, the first ready rows of the whole queue by
// run_at through (queue, run_at), and the first ready rows of each priority 1..9 through the
// partial (queue, priority, run_at) WHERE priority <> 0 index (migration 0008; short range
// scans of at most the queue's scan limit each), and takes them in order of run_at minus
// lead. Within one priority that is run_at order, so a row of priority p >= 1 among the
// queue's first rows by "due - lead" is among its level's first rows; a row of priority 0
// (lead 0) among them is among the queue's first rows by due time, since every row due
// before it also sorts before it (leads are >= 0). So the claim is exact, never early
// (run_at <= now() as for every row), and costs ten index probes instead of one. Only the
// rows it takes are then locked, by primary key with SKIP LOCKED and run_at rechecked, so a
// row another claimer took in between is left out (this claim returns fewer) rather than
// waited for; locking every level's rows made the claim of a queue with ten busy levels lock
// ten times the rows it hands out (measured 1.7x slower). Other queues in the same request
// read their first rows by run_at only, every priority, as sqlClaim does; requests without
// a prioritized queue run sqlClaim, unchanged.
//
// Queues that switch: rows stored while a queue was not prioritized are priority 0 and are
// read through (queue, run_at) once it is; a queue no longer prioritized claims its rows of
// every priority by due time, as any plain queue.
//
// Cost on publish and claim: rows of priority 0 (every row of a queue that is not
// prioritized) are not in the priority index, so a claim, which moves run_at and so writes
// an entry to every index that holds its row, writes one index entry fewer than with the
// full index of migration 0005; a row of priority >= 1 is in it.

// Prioritizes implements core.Prioritizer: the jobs table honours priorities.
func (be *Backend) Prioritizes() error { return nil }

// prio is the priority column of b's row.
func prio(b core.OutgoingBatch) int16 {
	if !core.ValidPriority(b.Priority) {
		return 0
	}
	return int16(b.Priority)
}

// sqlClaimPrio is sqlClaim for a request with a prioritized queue: $8 says which queues are
// (bool[], aligned with $1); the rest of the statement (lk, claimed and the next due time) is
// sqlClaim's own.
var sqlClaimPrio = `
WITH req AS (
	SELECT r.q, r.lim, r.excl, CASE WHEN r.prio THEN ` + strconv.Itoa(core.MaxPriority) + ` ELSE 0 END AS top
	FROM unnest($1::text[], $2::int[], $3::bool[], $8::bool[]) AS r(q, lim, excl, prio)
	WHERE set_config('synchronous_commit', COALESCE($7::text, current_setting('synchronous_commit')), true) IS NOT NULL
),
pick AS MATERIALIZED (
	SELECT c.id, r.q, r.excl, r.lim,
		row_number() OVER (PARTITION BY r.q ORDER BY c.run_at - c.lead_us * interval '1 microsecond', c.id) AS rn
	FROM req r
	CROSS JOIN LATERAL (
		(SELECT j.id, j.run_at, j.lead_us FROM {{s}}.txmq_jobs j
		WHERE j.queue = r.q AND j.run_at <= now()
		ORDER BY j.run_at
		LIMIT r.lim)
		UNION
		SELECT c.id, c.run_at, c.lead_us
		FROM unnest(ARRAY[` + levels() + `]::int[]) AS l(lvl)
		CROSS JOIN LATERAL (
			SELECT j.id, j.run_at, j.lead_us FROM {{s}}.txmq_jobs j
			WHERE j.queue = r.q AND j.priority = l.lvl AND j.priority <> 0 AND j.run_at <= now()
			ORDER BY j.run_at
			LIMIT r.lim
		) c
		WHERE l.lvl <= r.top
	) c
),
cand AS MATERIALIZED (
	SELECT j.id, k.q, k.excl FROM {{s}}.txmq_jobs j JOIN pick k ON k.id = j.id
	WHERE j.id = ANY(ARRAY(SELECT id FROM pick WHERE rn <= lim ORDER BY rn, id LIMIT $4::int)) AND j.run_at <= now()
	FOR UPDATE OF j SKIP LOCKED
),
` + sqlClaim[claimTail():]

// levels is the priorities above the lowest, lowest first, as an SQL array's elements (the
// lowest is read through (queue, run_at), see sqlClaimPrio): a constant array, because
// generate_series(1, r.top) under a generic plan made the claim about a hundred times slower
// (measured: 500 ms against 5 ms with 5,000 ready rows).
func levels() string {
	var b strings.Builder
	for p := core.MinPriority + 1; p <= core.MaxPriority; p++ {
		if p > core.MinPriority+1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}

// upperLevels is the priority levels above the lowest, as an SQL array's elements.
func upperLevels() string {
	_, rest, _ := strings.Cut(levels(), ",")
	return rest
}

// claimTail is where sqlClaim's CTEs after cand begin.
func claimTail() int {
	i := strings.Index(sqlClaim, "\nlk AS (")
	if i < 0 {
		panic("sqljobs: sqlClaim has no lk CTE; update sqlClaimPrio")
	}
	return i + 1
}
