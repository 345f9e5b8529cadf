package mysql

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/roundrobin"
)

// Fair share by key (core.FairSharer). A batch's fairness key (core.OutgoingBatch.FairKey) is
// stored with its row (column fair_key, migration 0003; '' on other queues) and keeps
// through every later change of the row (a retry, an expired lease, the next row of an
// ordering key becoming due: run_at moves, the column does not); split parts carry their own.
// The claim of a fair queue (core.QueueSlots.Fair), inside the claim transaction:
//
//   - locks the queue's turn row (txmq_jobs_fair, made once per queue and Backend; FOR
//     UPDATE), so the fair claims of one queue, from every node, take turns and each reads the
//     turn the previous one left (no key served twice by two claims at once);
//   - with a KeyLimit, counts each key's live leases (rows with a lease token and run_at after
//     now) and passes over the keys at their limit;
//   - lists the keys with a ready row, from the key after the last one served to the end and
//     then from the first key (sqlFairKeys: GROUP BY fair_key HAVING MIN(run_at) <= now, a
//     loose index scan of (queue, fair_key, run_at): one probe per key), as many as the claim
//     may take;
//   - reads up to that many ready rows of each of those keys (one UNION ALL of SELECT ... FOR
//     UPDATE SKIP LOCKED, one part per key), and takes them round-robin: each key's first row
//     in turn order, then each key's second, ...;
//   - moves the turn to the key of the last row claimed.
//
// A claim of one therefore takes the next key's first ready row, so a ready batch waits at
// most one claim per other key with ready rows. Within a key rows go by run_at; on a queue
// both Fair and Prioritized (core.FairPrioritizer) by run_at minus lead, as on a prioritized
// queue: each key's part is then its first ready rows by run_at (any priority) and the first
// ready rows of each priority 1..9 (sqlPickKeyLevel, through (queue, fair_key, priority,
// run_at, id), migration 0005), ranked by run_at minus lead and cut to the key's room. Exact:
// a priority-0 row among the key's best n is among its first n by run_at, since every row due
// before it ranks ahead of it. Fairness comes first: the turn picks the key. Ordered queues:
// only a key's head is ever ready (the rows behind it are held), so per-key order comes first.
//
// Cost: one more index entry per row (every queue); a fair claim adds the turn row's lock and
// update, the key listing (one probe per key it passes, at most fairScanKeys) and the rows
// read per key, which stay locked only until the claim commits. A fair, prioritized claim
// reads nine more range scans per key (up to ten times the rows, locked until the commit),
// and every row has one more index entry.

// fairScanKeys caps the keys one fair claim lists.
const fairScanKeys = 1000

var _ core.FairSharer = (*Backend)(nil)

// SharesFairly implements core.FairSharer: the jobs table shares claims fairly by key.
func (be *Backend) SharesFairly() error { return nil }

var _ core.FairPrioritizer = (*Backend)(nil)

// SharesFairlyByPriority implements core.FairPrioritizer: within each key of a fair queue the
// jobs table ranks rows by run_at minus lead.
func (be *Backend) SharesFairlyByPriority() error { return nil }

// sqlFairRow makes sure a fair queue's turn row exists.
const sqlFairRow = `INSERT IGNORE INTO {{s}}txmq_jobs_fair (queue, last_key) VALUES (?, '')`

// sqlFairTurn locks a fair queue's turn row and reads the last key served.
const sqlFairTurn = `SELECT last_key FROM {{s}}txmq_jobs_fair FORCE INDEX (PRIMARY) WHERE queue = ? FOR UPDATE`

// sqlFairMove moves a fair queue's turn. $1 key, $2 queue.
const sqlFairMove = `UPDATE {{s}}txmq_jobs_fair FORCE INDEX (PRIMARY) SET last_key = ? WHERE queue = ?`

// sqlFairKeysAfter and sqlFairKeysUpTo list a queue's keys with a ready row after, and up to,
// a key, in key order. $1 queue, $2 key, $3 limit.
const (
	sqlFairKeysAfter = `SELECT fair_key FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_fair_idx)
WHERE queue = ? AND fair_key > ? GROUP BY fair_key HAVING MIN(run_at) <= {{now}} ORDER BY fair_key LIMIT ?`
	sqlFairKeysUpTo = `SELECT fair_key FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_fair_idx)
WHERE queue = ? AND fair_key <= ? GROUP BY fair_key HAVING MIN(run_at) <= {{now}} ORDER BY fair_key LIMIT ?`
)

// sqlFairBusy counts a queue's live leases per fairness key, for a KeyLimit.
const sqlFairBusy = `SELECT fair_key, COUNT(*) FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND run_at > {{now}} AND lease_token IS NOT NULL GROUP BY fair_key`

// sqlPickKey is one key's part of a fair queue's pick. $1 queue, $2 key, $3 limit.
const sqlPickKey = `(SELECT id, queue, batch_id, body, deliveries, order_key, run_at, {{now}}, fair_key, lead_us
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_fair_idx)
WHERE queue = ? AND fair_key = ? AND run_at <= {{now}}
ORDER BY run_at LIMIT ?
FOR UPDATE SKIP LOCKED)`

// sqlPickKeyLevel is one priority level of one key's part of a fair, prioritized queue's pick.
// $1 queue, $2 key, $3 priority, $4 limit.
const sqlPickKeyLevel = `(SELECT id, queue, batch_id, body, deliveries, order_key, run_at, {{now}}, fair_key, lead_us
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_fair_priority_idx)
WHERE queue = ? AND fair_key = ? AND priority = ? AND run_at <= {{now}}
ORDER BY run_at LIMIT ?
FOR UPDATE SKIP LOCKED)`

// pickFair locks the turn of fair queue and returns up to limit of its ready rows in fair
// order (see the comment at the top of this file); keyLimit > 0 caps each key's live leases;
// prio ranks each key's rows by run_at minus lead.
func (be *Backend) pickFair(ctx context.Context, tx *sql.Tx, queue string, limit, keyLimit int, prio bool) ([]picked, error) {
	var last string
	if err := tx.QueryRowContext(ctx, be.sql.fairTurn, queue).Scan(&last); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var busy map[string]int
	if keyLimit > 0 {
		busy = map[string]int{}
		var (
			k string
			n int
		)
		rows, err := tx.QueryContext(ctx, be.sql.fairBusy, queue)
		if err := eachRow(rows, err, []any{&k, &n}, func() error { busy[k] = n; return nil }); err != nil {
			return nil, err
		}
	}
	want := min(limit+len(busy), fairScanKeys) // keys at their limit are listed and passed over
	var keys []string
	for _, stmt := range []string{be.sql.fairKeysAfter, be.sql.fairKeysUpTo} {
		if len(keys) >= want {
			break
		}
		var k string
		rows, err := tx.QueryContext(ctx, stmt, queue, last, want-len(keys))
		if err := eachRow(rows, err, []any{&k}, func() error { keys = append(keys, k); return nil }); err != nil {
			return nil, err
		}
	}
	parts := make([]string, 0, len(keys))
	args := make([]any, 0, 3*len(keys))
	pos := make(map[string]int, len(keys))
	rooms := make(map[string]int, len(keys))
	for _, k := range keys {
		room := limit
		if keyLimit > 0 {
			room = min(room, keyLimit-busy[k])
		}
		if room <= 0 {
			continue
		}
		pos[k], rooms[k] = len(pos), room
		parts = append(parts, be.sql.pickKey)
		args = append(args, queue, k, room)
		if prio {
			for lvl := core.MinPriority + 1; lvl <= core.MaxPriority; lvl++ {
				parts = append(parts, be.sql.pickKeyLevel)
				args = append(args, queue, k, lvl, room)
			}
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	var (
		all []picked
		r   picked
	)
	seen := map[int64]bool{} // a prioritized key's first rows by run_at and its levels' overlap
	rows, err := tx.QueryContext(ctx, strings.Join(parts, "\nUNION ALL\n"), args...)
	err = eachRow(rows, err, []any{&r.id, &r.queue, &r.batchID, &r.body, &r.deliveries, &r.key, &r.runAt, &r.now, &r.fairKey, &r.lead}, func() error {
		if seen[r.id] {
			return nil
		}
		seen[r.id] = true
		c := r
		c.body = append([]byte(nil), r.body...)
		if !prio {
			c.lead = 0
		}
		all = append(all, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// per key by run_at (minus lead), keys in turn order, each cut to its room (a prioritized
	// key's levels read up to its room each), then round-robin
	lanes := make([]int, len(pos))
	for k, i := range pos {
		lanes[i] = rooms[k]
	}
	all = roundrobin.Order(all, func(c *picked) roundrobin.Row {
		return roundrobin.Row{Lane: pos[c.fairKey], Due: c.runAt - c.lead, ID: c.id}
	}, func(lane int) int { return lanes[lane] })
	return all[:min(len(all), limit)], nil
}

// fairQueue reports whether queue was requested as fair.
func (p claimParams) fairQueue(queue string) bool {
	if p.fair == nil {
		return false
	}
	i, ok := slices.BinarySearch(p.queues, queue) // sorted by claimParamsOf
	return ok && p.fair[i]
}

// applyFair picks the rows of each fair queue of p (in queue order, within the request's
// budget: roundrobin.FairFirst) and returns p with those queues left out of the plain pick and the budget reduced.
func (be *Backend) applyFair(ctx context.Context, tx *sql.Tx, p claimParams) (claimParams, []picked, error) {
	if p.fair == nil {
		return p, nil, nil
	}
	limits, budget, rows, err := roundrobin.FairFirst(p.fair, p.limits, p.budget, func(i, n int) ([]picked, error) {
		return be.pickFair(ctx, tx, p.queues[i], n, p.keyLim[i], p.prio != nil && p.prio[i])
	})
	if err != nil {
		return p, nil, err
	}
	p.limits, p.budget = limits, budget
	return p, rows, nil
}

// moveTurns records, for each fair queue claimed from, the key of its last row claimed.
func (be *Backend) moveTurns(ctx context.Context, tx *sql.Tx, turns map[string]string) error {
	for q, k := range turns {
		if _, err := tx.ExecContext(ctx, be.sql.fairMove, k, q); err != nil {
			return err
		}
	}
	return nil
}
