package mysql

import (
	"github.com/txmq/txmq/core"
)

// Priorities (core.Prioritizer), as in sqljobs. A batch's priority and lead
// (core.OutgoingBatch.Priority and Lead, its priority times its queue's aging step) are
// stored with its row (columns priority and lead_us, migration 0002), and keep through every
// later change of the row: run_at moves, the columns do not.
//
// The claim's pick reads a prioritized queue (core.QueueSlots.Prioritized) one priority at a
// time: one SELECT ... FOR UPDATE SKIP LOCKED per level 0..9 through the (queue, priority,
// run_at, id) index, each locking at most the queue's scan limit, joined with UNION ALL with
// the other queues' parts; the rows are then ranked by run_at minus lead. Within one priority
// that is run_at order, so the first rows of the queue by "due - lead" are among them: exact,
// never early (run_at <= now as for every row), for ten index probes instead of one. The rows
// read beyond those taken stay locked only until the claim's transaction commits. Queues that
// are not prioritized are picked as before.

// Prioritizes implements core.Prioritizer: the jobs table honours priorities.
func (be *Backend) Prioritizes() error { return nil }

// sqlPickLevel is one priority level of a prioritized queue's part of the claim's pick.
const sqlPickLevel = `(SELECT id, queue, batch_id, body, deliveries, order_key, run_at, {{now}}, lead_us
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_priority_idx)
WHERE queue = ? AND priority = ? AND run_at <= {{now}}
ORDER BY run_at LIMIT ?
FOR UPDATE SKIP LOCKED)`

// levelParts appends the pick's parts and arguments for the levels of a prioritized queue.
func (be *Backend) levelParts(parts []string, args []any, queue string, limit int) ([]string, []any) {
	for lvl := core.MinPriority; lvl <= core.MaxPriority; lvl++ {
		parts = append(parts, be.sql.pickLevel)
		args = append(args, queue, lvl, limit)
	}
	return parts, args
}

// prio is the priority column of b's row.
func prio(b core.OutgoingBatch) int {
	if !core.ValidPriority(b.Priority) {
		return 0
	}
	return b.Priority
}
