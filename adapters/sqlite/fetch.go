package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/roundrobin"
)

// minTimer is the shortest timer a waiting Fetch arms, so rounding cannot make it spin.
const minTimer = 5 * time.Millisecond

// sqlPickQueue is one queue's part of the claim's pick (its index {{i}}): an index range
// scan of (queue, run_at) over run_at <= now, in due order. The parts of a request's queues
// are joined with UNION ALL. It runs inside the claim's BEGIN IMMEDIATE transaction, which
// holds the file's write lock: no other claimer can pick the same rows meanwhile.
const sqlPickQueue = `SELECT * FROM (SELECT id, queue, batch_id, body, deliveries, order_key, run_at, 0, 0
FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :q{{i}} AND run_at <= :now
ORDER BY run_at LIMIT :l{{i}})`

// sqlLease leases the picked rows: a new token, deliveries+1, run_at = the lease's end.
const sqlLease = `
UPDATE txmq_jobs
SET deliveries = deliveries + 1, lease_token = :token, lease_owner = :node, run_at = :until
WHERE id IN ({{in}})`

// sqlExclusiveRow makes sure an Exclusive queue's lock row exists (released).
const sqlExclusiveRow = `INSERT OR IGNORE INTO txmq_jobs_exclusive (queue, job_id, lease_until) VALUES (:queue, 0, 0)`

// sqlExclusiveTake takes an Exclusive queue's lock for a job when its last lease has passed.
const sqlExclusiveTake = `
UPDATE txmq_jobs_exclusive SET job_id = :job, lease_until = :until
WHERE queue = :queue AND lease_until <= :now`

// sqlNextDueQueue is one queue's part of the wait timer's query: its next row to become
// claimable (a delayed batch or a lease running out; held rows wait for an ack instead).
const sqlNextDueQueue = `SELECT * FROM (SELECT run_at FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :q{{i}} AND run_at > :now AND run_at < 9223372036854775807
ORDER BY run_at LIMIT 1)`

// sqlPeekQueue is one queue's part of the claim's peek: the smallest run_at of its rows that
// are not held behind an ordering key, one probe of the claim index. The peek runs as a plain
// read (WAL readers take no lock), so a fetch that finds nothing due never takes the file's
// write lock.
const sqlPeekQueue = `SELECT * FROM (SELECT run_at FROM txmq_jobs INDEXED BY txmq_jobs_claim_idx
WHERE queue = :q{{i}} AND run_at < 9223372036854775807
ORDER BY run_at LIMIT 1)`

// sqlHeartbeat records that the queues were fetched now.
const sqlHeartbeat = `
INSERT INTO txmq_jobs_queues (queue, last_fetch_at) VALUES {{in}}
ON CONFLICT (queue) DO UPDATE SET last_fetch_at = excluded.last_fetch_at`

// Fetch claims due batches for the queues in req (normalised: see core.FetchRequest.Normalize)
// in one BEGIN IMMEDIATE transaction (see the package doc): at most Free of each queue and
// req.Max in all, shared round-robin, and none of an Exclusive queue while any node holds one.
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
	lim    []int  // the queues' cluster-wide limits, 0 for none; nil when none has one (see clusterlimit.go)
	fair   []bool // the fair queues; nil when none is (see fair.go)
	keyLim []int  // the fair queues' limits per key (0: none); set with fair
}

// claimParamsOf turns a normalised request into statement arguments (core's ScanLimits:
// queues sorted, each with its scan limit); the queues share req.Max round-robin.
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
		if s.Prioritized {
			if p.prio == nil {
				p.prio = make([]bool, len(qs))
			}
			p.prio[i] = true
		}
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
	}
	return p
}

// exclusive reports whether queue was requested as Exclusive.
func (p claimParams) exclusive(queue string) bool {
	i, ok := slices.BinarySearch(p.queues, queue) // sorted by claimParamsOf
	return ok && p.excl[i]
}

// picked is one row the claim's pick found.
type picked struct {
	id         int64
	queue      string
	batchID    string
	body       []byte
	deliveries int
	key        sql.NullString
	runAt      int64
	lead       int64  // µs: sorts as if due this much earlier (a prioritized queue's rows)
	fairKey    string // a fair queue's rows: the row's fairness key
	bare       bool   // read from an index only: batchID, body, deliveries, key unset
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
	if wait, err := be.peek(ctx, p.queues); err != nil || wait != 0 {
		return claims, wait, err // nothing due: no write transaction
	}
	err := be.run(context.WithoutCancel(ctx), "fetch", func(ctx context.Context) error {
		claims = claims[:0]
		return be.inTx(ctx, func(tx execer) error {
			now := time.Now().UnixMicro()
			room, err := p.withRoom(ctx, tx, now) // limited queues cut to the room left
			if err != nil {
				return err
			}
			room, fairRows, err := be.applyFair(ctx, tx, room, now) // fair queues' rows first
			if err != nil {
				return err
			}
			cand, err := be.pick(ctx, tx, room, now)
			if err != nil {
				return err
			}
			cand = append(fairRows, cand...)
			if len(cand) == 0 {
				return nil
			}
			if err := fillBare(ctx, tx, cand); err != nil { // the rows read from an index only
				return err
			}
			until := now + p.lease
			ids := make([]int64, 0, len(cand))
			var turns map[string]string // fair queue -> key of its last row claimed
			for _, c := range cand {
				if p.exclusive(c.queue) {
					n, err := affected(ctx, tx, sqlExclusiveTake, sql.Named("job", c.id), sql.Named("until", until), sql.Named("queue", c.queue), sql.Named("now", now))
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
			if err := moveTurns(ctx, tx, turns); err != nil {
				return err
			}
			token := newToken()
			for _, c := range claims {
				c.Handle.(*handle).token = token
			}
			args := append([]any{sql.Named("token", token), sql.Named("node", p.node), sql.Named("until", until)}, listArgs("id", ids)...)
			_, err = tx.ExecContext(ctx, withList(sqlLease, "id", len(ids)), args...)
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

// parts joins one part per queue (part with {{i}} its index) with UNION ALL.
func parts(part string, n int) string {
	out := make([]string, n)
	for i := range n {
		out[i] = strings.ReplaceAll(part, "{{i}}", fmt.Sprint(i))
	}
	return strings.Join(out, "\nUNION ALL\n")
}

// pick reads up to each queue's limit of claimable rows (ten levels of a prioritized queue,
// see priority.go) and returns those the request's budget takes, round-robin across the
// queues (every queue's first row, then every second, ...), in queue order within a round;
// within a queue by run_at minus lead (core/roundrobin). A prioritized queue's rows are bare:
// the claim reads the details of the rows it takes (fillBare), with the fair queues'.
func (be *Backend) pick(ctx context.Context, tx execer, p claimParams, now int64) ([]picked, error) {
	var all []picked
	var r picked
	for chunk := range slices.Chunk(p.pickParts(), maxPickParts) {
		stmt, args := pickStatement(chunk, now)
		rows, err := tx.QueryContext(ctx, stmt, args...)
		err = eachRow(rows, err, []any{&r.id, &r.queue, &r.batchID, &r.body, &r.deliveries, &r.key, &r.runAt, &r.lead, &r.bare}, func() error {
			c := r
			c.body = append([]byte(nil), r.body...)
			all = append(all, c)
			return nil
		})
		if err != nil {
			return nil, err
		}
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

// peek returns 0 when a row of queues may be claimable now (the claim transaction decides),
// else how long until the next one becomes due, -1 for none; it reads without a lock.
func (be *Backend) peek(ctx context.Context, queues []string) (time.Duration, error) {
	stmt := "SELECT MIN(t.run_at) - :now FROM (" + parts(sqlPeekQueue, len(queues)) + ") t"
	var us sql.NullInt64
	err := be.run(context.WithoutCancel(ctx), "fetch", func(ctx context.Context) error {
		return be.db.QueryRowContext(ctx, stmt, append(listArgs("q", queues), nowArg())...).Scan(&us)
	})
	switch {
	case err != nil:
		return -1, err
	case !us.Valid:
		return -1, nil
	case us.Int64 <= 0:
		return 0, nil
	}
	return max(time.Duration(us.Int64)*time.Microsecond, minTimer), nil
}

// nextDue returns how long until the next row of queues becomes claimable, -1 for none.
func (be *Backend) nextDue(ctx context.Context, queues []string) (time.Duration, error) {
	stmt := "SELECT MIN(t.run_at) - :now FROM (" + parts(sqlNextDueQueue, len(queues)) + ") t"
	var us sql.NullInt64
	err := be.run(context.WithoutCancel(ctx), "fetch: next due time", func(ctx context.Context) error {
		return be.db.QueryRowContext(ctx, stmt, append(listArgs("q", queues), nowArg())...).Scan(&us)
	})
	if err != nil || !us.Valid {
		return -1, err
	}
	return max(0, time.Duration(us.Int64)*time.Microsecond), nil
}

// ensureExclusive makes the lock rows of the request's Exclusive queues exist, once per queue
// and Backend.
func (be *Backend) ensureExclusive(ctx context.Context, p claimParams) error {
	for i, q := range p.queues {
		if !p.excl[i] {
			continue
		}
		be.exclMu.Lock()
		ready := be.exclReady[q]
		be.exclMu.Unlock()
		if ready {
			continue
		}
		err := be.run(context.WithoutCancel(ctx), "fetch: exclusive lock row of queue "+q, func(ctx context.Context) error {
			_, err := be.exec(ctx, sqlExclusiveRow, sql.Named("queue", q))
			return err
		})
		if err != nil {
			return err
		}
		be.exclMu.Lock()
		be.exclReady[q] = true
		be.exclMu.Unlock()
	}
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
	values := make([]string, len(due))
	for i := range due {
		values[i] = fmt.Sprintf("(:q%d, :now)", i)
	}
	stmt := strings.Replace(sqlHeartbeat, "{{in}}", strings.Join(values, ", "), 1)
	err := be.run(context.WithoutCancel(ctx), "recording queue heartbeats", func(ctx context.Context) error {
		_, err := be.exec(ctx, stmt, append(listArgs("q", due), nowArg())...)
		return err
	})
	if err != nil {
		be.hb.Failed(due)
		be.o.Logger.Warn("sqlite: recording queue heartbeats failed; retried at the next fetch", "queues", len(due), "error", err)
	}
	return err
}
