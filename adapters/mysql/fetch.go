package mysql

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/roundrobin"
)

// minTimer is the shortest timer a waiting Fetch arms, so rounding cannot make it spin.
const minTimer = 5 * time.Millisecond

// sqlPickQueue is one queue's part of the claim's pick: an index range scan of (queue, run_at)
// over run_at <= now, locked with FOR UPDATE SKIP LOCKED so concurrent claimers never wait on
// each other's rows. The parts of a request's queues are joined with UNION ALL.
const sqlPickQueue = `(SELECT id, queue, batch_id, body, deliveries, order_key, run_at, {{now}}, 0
FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND run_at <= {{now}}
ORDER BY run_at LIMIT ?
FOR UPDATE SKIP LOCKED)`

// sqlLease leases the picked rows: a new token, deliveries+1, run_at = the lease's end.
// $1 token, $2 node, $3 lease end, then the ids.
const sqlLease = `
UPDATE {{s}}txmq_jobs FORCE INDEX (PRIMARY)
SET deliveries = deliveries + 1, lease_token = ?, lease_owner = ?, run_at = ?
WHERE id IN ({{in}})`

// sqlExclusiveRow makes sure an Exclusive queue's lock row exists (released).
const sqlExclusiveRow = `INSERT IGNORE INTO {{s}}txmq_jobs_exclusive (queue, job_id, lease_until) VALUES (?, 0, 0)`

// sqlExclusiveTake takes an Exclusive queue's lock for a job when its last lease has passed:
// the row lock serialises concurrent claimers on every node, so one wins. $1 job, $2 lease
// end, $3 queue.
const sqlExclusiveTake = `
UPDATE {{s}}txmq_jobs_exclusive FORCE INDEX (PRIMARY) SET job_id = ?, lease_until = ?
WHERE queue = ? AND lease_until <= {{now}}`

// sqlNextDueQueue is one queue's part of the wait timer's query: its next row to become
// claimable (a delayed batch or a lease running out; held rows wait for an ack instead).
const sqlNextDueQueue = `(SELECT run_at FROM {{s}}txmq_jobs FORCE INDEX (txmq_jobs_claim_idx)
WHERE queue = ? AND run_at > {{now}} AND run_at < 9223372036854775807
ORDER BY run_at LIMIT 1)`

// sqlHeartbeat records that the queues were fetched now.
const sqlHeartbeat = `
INSERT INTO {{s}}txmq_jobs_queues (queue, last_fetch_at) VALUES {{in}}
ON DUPLICATE KEY UPDATE last_fetch_at = {{now}}`

// Fetch claims due batches for the queues in req (normalised: see core.FetchRequest.Normalize)
// in one transaction (see the package doc): at most Free of each queue and req.Max in all,
// shared round-robin, and none of an Exclusive queue while any node holds one.
//
// When nothing is claimable and req.Wait > 0 it waits (core.ClaimWait) for a publish or retry
// through this Backend on one of its queues, for the next poll (Options.PollInterval), and on
// a timer for the next delayed batch or lease end among them; each wake-up claims again.
//
// The claim runs detached from ctx's cancellation (bounded by QueryTimeout), so a claim the
// database made is always returned; cancelling ctx only ends the wait, with what was claimed
// and a nil error.
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	if err := be.usable("fetch"); err != nil {
		return nil, err
	}
	req = req.Normalize()
	if len(req.Queues) == 0 || ctx.Err() != nil {
		return []*core.Claim{}, nil
	}
	p := claimParamsOf(req)
	if err := be.heartbeat(ctx, p.queues); err != nil && errors.Is(err, core.ErrBackendUnavailable) {
		return nil, err
	}
	wo := core.WaitOptions{Wait: req.Wait, Done: be.done, MinTimer: minTimer}
	if req.Wait > 0 {
		w := be.wake.Register(p.queues) // before the first claim: no signal falls in between
		defer be.wake.Unregister(w, p.queues)
		wo.Wake = func() <-chan struct{} { return w.Arm(be.o.PollInterval) }
	}
	return core.ClaimWait(ctx, wo, func() ([]*core.Claim, time.Duration, error) { return be.claim(ctx, p) })
}

// claimParams are one Fetch's statement arguments.
type claimParams struct {
	queues []string
	limits []int
	excl   []bool
	budget int
	node   string
	lease  int64  // µs
	prio   []bool // the prioritized queues; nil when none is (see priority.go)
	lim    []int  // the queues' cluster-wide limits (0: none); nil when none has one (see clusterlimit.go)
	fair   []bool // the fair queues; nil when none is (see fair.go)
	keyLim []int  // the fair queues' limits per key (0: none); set with fair
}

// claimParamsOf turns a normalised request into statement arguments (core's ScanLimits:
// queues sorted, so exclusive locks are always taken in the same order, and each one's scan
// limit); the queues share req.Max round-robin.
func claimParamsOf(req core.FetchRequest) claimParams {
	qs, limits := req.ScanLimits()
	p := claimParams{
		queues: make([]string, len(qs)),
		limits: limits,
		excl:   make([]bool, len(qs)),
		budget: min(req.Max, math.MaxInt32),
		node:   req.Node,
		lease:  micros(req.Lease),
	}
	for i, s := range qs {
		p.queues[i], p.excl[i] = s.Queue, s.Exclusive
		if s.Fair {
			if p.fair == nil {
				p.fair, p.keyLim = make([]bool, len(qs)), make([]int, len(qs))
			}
			p.fair[i], p.keyLim[i] = true, max(s.KeyLimit, 0)
		}
		if s.Limit > 0 {
			if p.lim == nil {
				p.lim = make([]int, len(qs))
			}
			p.lim[i] = s.Limit
		}
		if s.Prioritized {
			if p.prio == nil {
				p.prio = make([]bool, len(qs))
			}
			p.prio[i] = true
		}
	}
	return p
}

// exclusive reports whether queue was requested as Exclusive.
func (p claimParams) exclusive(queue string) bool {
	i, ok := slices.BinarySearch(p.queues, queue) // sorted by claimParamsOf
	return ok && p.excl[i]
}

// picked is one row the claim's pick locked.
type picked struct {
	id         int64
	queue      string
	batchID    string
	body       []byte
	deliveries int
	key        sql.NullString
	runAt, now int64
	lead       int64  // µs: sorts as if due this much earlier (a prioritized queue's rows)
	fairKey    string // a fair queue's rows: the row's fairness key
}

// claim runs the claim transaction once and returns the claims and, when there are none, how
// long until the next row of the queues becomes claimable (-1 when none is pending).
func (be *Backend) claim(ctx context.Context, p claimParams) ([]*core.Claim, time.Duration, error) {
	claims := []*core.Claim{}
	if len(p.queues) == 0 {
		return claims, -1, nil
	}
	if err := be.ensureExclusive(ctx, p); err != nil {
		return nil, -1, err
	}
	err := be.run(context.WithoutCancel(ctx), "fetch", func(ctx context.Context) error {
		claims = claims[:0]
		return inTx(ctx, be.db, readCommitted, func(tx *sql.Tx) error {
			p, err := be.applyLimits(ctx, tx, p)
			if err != nil {
				return err
			}
			p, fairRows, err := be.applyFair(ctx, tx, p)
			if err != nil {
				return err
			}
			cand, err := be.pick(ctx, tx, p)
			if err != nil {
				return err
			}
			cand = append(fairRows, cand...)
			if len(cand) == 0 {
				return nil
			}
			now := cand[0].now
			until := now + p.lease
			ids := make([]int64, 0, len(cand))
			var turns map[string]string // fair queue -> key of its last row claimed
			for _, c := range cand {
				if p.exclusive(c.queue) {
					n, err := affected(ctx, tx, be.sql.exclusiveTake, c.id, until, c.queue)
					if err != nil {
						return err
					}
					if n == 0 {
						continue // another node runs the queue
					}
				}
				ids = append(ids, c.id)
				claims = append(claims, c.claim(be, until, p.exclusive(c.queue), p.limited(c.queue) || p.fairQueue(c.queue)))
				if p.fairQueue(c.queue) {
					if turns == nil {
						turns = map[string]string{}
					}
					turns[c.queue] = c.fairKey
				}
			}
			if len(ids) == 0 {
				return nil
			}
			if err := be.moveTurns(ctx, tx, turns); err != nil {
				return err
			}
			token := newToken()
			for _, c := range claims {
				c.Handle.(*handle).token = token
			}
			args := append([]any{token, p.node, until}, int64Args(ids)...)
			_, err = tx.ExecContext(ctx, withMarks(be.sql.lease, len(ids)), args...)
			return err
		})
	})
	if err != nil {
		return nil, -1, err
	}
	if len(claims) > 0 {
		return claims, -1, nil
	}
	next, err := be.nextDue(ctx, p.queues)
	return claims, next, err
}

// pick locks up to each queue's limit of claimable rows and returns those the request's
// budget takes, round-robin across the queues (every queue's first row, then every second,
// ...), in queue order within a round.
func (be *Backend) pick(ctx context.Context, tx *sql.Tx, p claimParams) ([]picked, error) {
	parts := make([]string, 0, len(p.queues))
	args := make([]any, 0, 2*len(p.queues))
	for i, q := range p.queues {
		if p.prio != nil && p.prio[i] {
			parts, args = be.levelParts(parts, args, q, p.limits[i])
			continue
		}
		parts = append(parts, be.sql.pickQueue)
		args = append(args, q, p.limits[i])
	}
	var all []picked
	var r picked
	rows, err := tx.QueryContext(ctx, strings.Join(parts, "\nUNION ALL\n"), args...)
	err = eachRow(rows, err, []any{&r.id, &r.queue, &r.batchID, &r.body, &r.deliveries, &r.key, &r.runAt, &r.now, &r.lead}, func() error {
		c := r
		c.body = append([]byte(nil), r.body...)
		all = append(all, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// a prioritized queue's levels read up to its limit each: each queue keeps its limit
	all = roundrobin.Order(all, p.lane, func(lane int) int { return p.limits[lane] })
	return all[:min(len(all), p.budget)], nil
}

// lane is c's place in the pick's round-robin (package core/roundrobin): its queue's index
// in p.queues (sorted by claimParamsOf), then its due time minus lead.
func (p claimParams) lane(c *picked) roundrobin.Row {
	i, _ := slices.BinarySearch(p.queues, c.queue)
	return roundrobin.Row{Lane: i, Due: c.runAt - c.lead, ID: c.id}
}

// claim turns a leased row into a Claim.
func (r picked) claim(be *Backend, until int64, excl, limited bool) *core.Claim {
	return &core.Claim{
		Queue:      r.queue,
		ID:         r.batchID,
		Body:       r.body,
		Deliveries: r.deliveries + 1,
		LeaseUntil: time.UnixMicro(until),
		Handle:     &handle{be: be, id: r.id, excl: excl, limited: limited, queue: r.queue, key: r.key.String},
	}
}

// nextDue returns how long until the next row of queues becomes claimable, -1 for none.
func (be *Backend) nextDue(ctx context.Context, queues []string) (time.Duration, error) {
	parts := make([]string, len(queues))
	args := make([]any, len(queues))
	for i, q := range queues {
		parts[i], args[i] = be.sql.nextDueQueue, q
	}
	stmt := "SELECT MIN(t.run_at) - " + sqlNow + " FROM (" + strings.Join(parts, "\nUNION ALL\n") + ") t"
	var us sql.NullInt64
	err := be.run(context.WithoutCancel(ctx), "fetch: next due time", func(ctx context.Context) error {
		return be.db.QueryRowContext(ctx, stmt, args...).Scan(&us)
	})
	if err != nil || !us.Valid {
		return -1, err
	}
	return max(0, time.Duration(us.Int64)*time.Microsecond), nil
}

// ensureExclusive makes the lock rows of the request's Exclusive and limited queues, and the
// turn rows of its fair queues, exist, once per queue and Backend.
func (be *Backend) ensureExclusive(ctx context.Context, p claimParams) error {
	for i, q := range p.queues {
		if p.fair != nil && p.fair[i] {
			if err := be.ensureRow(ctx, "fair/"+q, "fetch: fair turn row of queue "+q, be.sql.fairRow, q); err != nil {
				return err
			}
		}
		if !p.excl[i] && (p.lim == nil || p.lim[i] <= 0) {
			continue
		}
		if err := be.ensureRow(ctx, q, "fetch: exclusive lock row of queue "+q, be.sql.exclusiveRow, q); err != nil {
			return err
		}
	}
	return nil
}

// ensureRow runs stmt (an INSERT IGNORE of a queue's lock row) once per name and Backend.
func (be *Backend) ensureRow(ctx context.Context, name, what, stmt, queue string) error {
	be.exclMu.Lock()
	ready := be.exclReady[name]
	be.exclMu.Unlock()
	if ready {
		return nil
	}
	err := be.run(context.WithoutCancel(ctx), what, func(ctx context.Context) error {
		_, err := be.db.ExecContext(ctx, stmt, queue)
		return err
	})
	if err != nil {
		return err
	}
	be.exclMu.Lock()
	be.exclReady[name] = true
	be.exclMu.Unlock()
	return nil
}

// heartbeat records, at most every heartbeatInterval per queue, that this Backend fetched
// the queues, for the reaper. A failure is logged, returned, and tried again at the next
// Fetch.
func (be *Backend) heartbeat(ctx context.Context, queues []string) error {
	due := be.hb.Due(queues, time.Now(), be.o.heartbeatInterval())
	if len(due) == 0 {
		return nil
	}
	args := make([]any, len(due))
	for i, q := range due {
		args[i] = q
	}
	values := strings.TrimSuffix(strings.Repeat("(?, "+sqlNow+"),", len(due)), ",")
	err := be.run(context.WithoutCancel(ctx), "recording queue heartbeats", func(ctx context.Context) error {
		_, err := be.db.ExecContext(ctx, strings.Replace(be.sql.heartbeat, "{{in}}", values, 1), args...)
		return err
	})
	if err != nil {
		be.hb.Failed(due)
		be.o.Logger.Warn("mysql: recording queue heartbeats failed; retried at the next fetch", "queues", len(due), "error", err)
	}
	return err
}
