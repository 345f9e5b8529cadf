package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/txmq/txmq/core"
)

var _ core.Prioritizer = (*Backend)(nil)

// Priorities (core.Prioritizer), as in sqljobs and mysql. A batch's priority and lead
// (core.OutgoingBatch.Priority and Lead, its priority times its queue's aging step) are
// stored with its row (columns priority and lead_us, migration 0003) when it is published,
// and keep through every later change of the row: a retry, a lease, an expired lease, an
// expedite and the head of an ordering key move run_at, never the two columns.
//
// The claim's pick reads a prioritized queue (core.QueueSlots.Prioritized) one priority at a
// time: one range scan of the (queue, priority, run_at, id) index per level 0..9, each reading
// at most the queue's scan limit of ready rows, joined with UNION ALL with the other queues'
// parts; the rows are then ranked by run_at minus lead, and the queue's first scan-limit rows
// by that rank are its candidates. Within one priority that is run_at order, so the first
// rows of the queue by "due - lead" are among them: exact, never early (run_at <= now as for
// every row), for ten index probes instead of one. The pick runs inside the claim's
// BEGIN IMMEDIATE transaction, which holds the file's write lock, so no other claimer reads
// the same rows meanwhile and nothing needs locking row by row. Queues that are not
// prioritized are picked as before, through the claim index.
//
// The level scans read the index only (it holds lead_us too); the claim then reads the body,
// batch id, deliveries and key of the rows it takes, by primary key. Cost on publish: one
// more index entry per row, on every queue (so that a prioritized queue's levels are each one
// range scan whatever its priorities).

// Prioritizes implements core.Prioritizer: the jobs table honours priorities.
func (be *Backend) Prioritizes() error { return nil }

// sqlPickLevel is one priority level ({{p}}, a constant) of a prioritized queue's part of the
// claim's pick (its index {{i}}): a range scan of (queue, priority, run_at, id, lead_us) over
// run_at <= now, in due order, reading the index alone (it covers the columns read). Its rows
// are bare (the last column): the claim reads the rest of the rows it takes only
// (sqlPickDetails), not of the up to ten times as many rows the levels read.
const sqlPickLevel = `SELECT * FROM (SELECT id, queue, '', NULL, 0, NULL, run_at, lead_us, 1
FROM txmq_jobs INDEXED BY txmq_jobs_priority_idx
WHERE queue = :q{{i}} AND priority = {{p}} AND run_at <= :now
ORDER BY run_at LIMIT :l{{i}})`

// sqlPickDetails reads the rest of the bare rows a claim takes, by primary key.
const sqlPickDetails = `SELECT id, batch_id, body, deliveries, order_key FROM txmq_jobs WHERE id IN ({{in}})`

// maxPickParts is the most parts one pick statement joins with UNION ALL: SQLite refuses a
// compound SELECT of more than 500 terms (SQLITE_MAX_COMPOUND_SELECT), so a request with
// more parts (ten per prioritized queue) runs several statements in the claim's transaction.
const maxPickParts = 500

// pickPart is one part of the claim's pick: a queue through the claim index (level < 0), or
// one priority level of a prioritized queue through the priority index.
type pickPart struct {
	queue string
	limit int
	level int
}

// pickParts returns the parts of p's pick: one per queue, ten per prioritized queue.
func (p claimParams) pickParts() []pickPart {
	out := make([]pickPart, 0, len(p.queues))
	for i, q := range p.queues {
		if p.fair != nil && p.fair[i] {
			continue // picked by applyFair (fair.go)
		}
		if p.prio == nil || !p.prio[i] {
			out = append(out, pickPart{queue: q, limit: p.limits[i], level: -1})
			continue
		}
		for lvl := core.MinPriority; lvl <= core.MaxPriority; lvl++ {
			out = append(out, pickPart{queue: q, limit: p.limits[i], level: lvl})
		}
	}
	return out
}

// pickStatement returns the statement joining parts with UNION ALL and its arguments.
func pickStatement(parts []pickPart, now int64) (string, []any) {
	stmts := make([]string, len(parts))
	args := make([]any, 0, 2*len(parts)+1)
	for i, pt := range parts {
		s := sqlPickQueue
		if pt.level >= 0 {
			s = strings.ReplaceAll(sqlPickLevel, "{{p}}", fmt.Sprint(pt.level))
		}
		stmts[i] = strings.ReplaceAll(s, "{{i}}", fmt.Sprint(i))
		args = append(args, sql.Named(fmt.Sprint("q", i), pt.queue), sql.Named(fmt.Sprint("l", i), pt.limit))
	}
	return strings.Join(stmts, "\nUNION ALL\n"), append(args, sql.Named("now", now))
}

// prio is the priority column of b's row.
func prio(b core.OutgoingBatch) int {
	if !core.ValidPriority(b.Priority) {
		return 0
	}
	return b.Priority
}

// fillBare reads the details of the bare rows among cand (sqlPickDetails), in place.
func fillBare(ctx context.Context, tx execer, cand []picked) error {
	at := map[int64]int{}
	var ids []int64
	for i, c := range cand {
		if c.bare {
			at[c.id] = i
			ids = append(ids, c.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var (
		id         int64
		batchID    string
		body       []byte
		deliveries int
		key        sql.NullString
	)
	rows, err := tx.QueryContext(ctx, withList(sqlPickDetails, "id", len(ids)), listArgs("id", ids)...)
	err = eachRow(rows, err, []any{&id, &batchID, &body, &deliveries, &key}, func() error {
		c := &cand[at[id]]
		c.batchID, c.body, c.deliveries, c.key, c.bare = batchID, append([]byte(nil), body...), deliveries, key, false
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range cand {
		if c.bare {
			return fmt.Errorf("sqlite: claim: row %d of queue %q vanished inside the claim's transaction", c.id, c.queue)
		}
	}
	return nil
}
