package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlcall"
)

// handle is the Claim.Handle of every claim: the row and the lease token of this handout.
// The token is new per claim transaction (random), so an earlier holder's token never matches
// the row again. settled is set by the first successful Ack, Retry or Drop (even one whose
// caller stopped waiting), which makes a later settle of the same claim a no-op.
type handle struct {
	be    *Backend
	id    int64
	token int64
	excl  bool // claimed as an Exclusive queue's batch
	// limited: claimed as the batch of a queue with a cluster-wide limit; its Ack and Drop
	// signal this process's waiting fetches (see clusterlimit.go).
	limited bool
	// queue names the batch's queue; key its ordering key (empty on unordered queues): its
	// Ack and Drop make the next batch of the key due.
	queue, key string

	sqlcall.Settlement // serialises settles and extensions; settled once
}

// groupReq is one claim's request in a grouped transaction (groupcommit).
type groupReq struct {
	h     *handle
	lease int64 // µs, extensions only

	ok    bool      // the row matched the id, token and a live lease
	until time.Time // the new lease end, extensions only
}

// sqlAckOne deletes one unordered, non-Exclusive batch under a live lease: the one-statement
// path of a lone Ack or Drop. $1 id, $2 token.
const sqlAckOne = `DELETE j FROM {{s}}txmq_jobs j FORCE INDEX (PRIMARY) WHERE j.id = ? AND j.lease_token = ? AND j.run_at > {{now}}`

// sqlLockRows locks a group's rows by primary key and reports whose lease holds.
const sqlLockRows = `
SELECT id, lease_token, run_at > {{now}}, {{now}} FROM {{s}}txmq_jobs FORCE INDEX (PRIMARY)
WHERE id IN ({{in}}) FOR UPDATE`

// sqlDeleteRows deletes the rows of a group whose lease held: a join of a derived table of
// their ids, read first (STRAIGHT_JOIN), to the jobs table by primary key. A DELETE takes no
// index hint, and with IN (...) MariaDB scans a table its statistics call small, locking
// every row it reads.
const sqlDeleteRows = `DELETE j FROM {{in}} d STRAIGHT_JOIN {{s}}txmq_jobs j ON j.id = d.id`

// sqlExclusiveRelease releases an Exclusive queue's lock held for a job. $1 queue, $2 job.
const sqlExclusiveRelease = `UPDATE {{s}}txmq_jobs_exclusive FORCE INDEX (PRIMARY) SET lease_until = 0 WHERE queue = ? AND job_id = ?`

// sqlExclusiveExtend moves an Exclusive queue's lock with its job's lease. $1 lease end,
// $2 queue, $3 job.
const sqlExclusiveExtend = `UPDATE {{s}}txmq_jobs_exclusive FORCE INDEX (PRIMARY) SET lease_until = ? WHERE queue = ? AND job_id = ?`

// sqlRetry releases a live lease: the batch is claimable again after the delay, with the new
// body and deliveries restarted (a rewrite), or, for a NULL body, as it was (in place).
// $1 body or NULL, $2 in place, $3 delay µs, $4 id, $5 token.
const sqlRetry = `
UPDATE {{s}}txmq_jobs FORCE INDEX (PRIMARY)
SET body = COALESCE(?, body), deliveries = IF(?, deliveries, 0), run_at = {{now}} + ?,
	lease_token = NULL, lease_owner = NULL
WHERE id = ? AND lease_token = ? AND run_at > {{now}}`

// Ack deletes a successfully processed batch and releases its Exclusive lock. Concurrent
// Acks and Drops share one transaction (see Options.SettleWindow); each returns its own
// claim's outcome.
func (be *Backend) Ack(ctx context.Context, c *core.Claim) error {
	return be.settle(ctx, "ack", c, be.deleteLeased)
}

// Drop deletes a batch the engine has given up on (reason is for logs only) and releases its
// Exclusive lock; it is grouped with Acks.
func (be *Backend) Drop(ctx context.Context, c *core.Claim, reason string) error {
	return be.settle(ctx, "drop ("+reason+")", c, be.deleteLeased)
}

// Retry releases the claim and its Exclusive lock; the batch is claimable again after delay.
// A non-nil body is stored as the batch's new body and Deliveries restarts at 0 (a rewrite);
// a nil body keeps the stored body and its Deliveries count (a retry in place).
func (be *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	return be.settle(ctx, "retry", c, func(ctx context.Context, h *handle) (bool, error) {
		var newBody any
		if body != nil {
			newBody = body
		}
		args := []any{newBody, body == nil, micros(max(delay, 0)), h.id, h.token}
		var n int64
		err := be.attempt(ctx, func(ctx context.Context) error {
			if !h.excl {
				var err error
				n, err = affected(ctx, be.db, be.sql.retry, args...)
				return err
			}
			return inTx(ctx, be.db, nil, func(tx *sql.Tx) error {
				var err error
				if n, err = affected(ctx, tx, be.sql.retry, args...); err != nil || n == 0 {
					return err
				}
				_, err = tx.ExecContext(ctx, be.sql.exclusiveRelease, h.queue, h.id)
				return err
			})
		})
		if n > 0 {
			be.wake.Signal(h.queue)
		}
		return n > 0, err
	})
}

// Extend pushes the claim's lease (and its Exclusive lock) to now+lease, by the database's
// clock (core.LeaseOr: the default when lease <= 0), and updates c.LeaseUntil. Extending a
// claim its holder already settled is a no-op. Concurrent extensions share one transaction.
func (be *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	lease = core.LeaseOr(lease)
	return be.settleOrExtend(ctx, "extend", c, false, func(ctx context.Context, h *handle) (bool, error) {
		req := &groupReq{h: h, lease: micros(lease)}
		if err := be.extends.Do(ctx, req); err != nil {
			return false, err
		}
		if req.ok {
			c.LeaseUntil = req.until
		}
		return req.ok, nil
	})
}

// deleteLeased deletes h's row in a group of Acks and Drops; true means the lease held and
// the row is gone.
func (be *Backend) deleteLeased(ctx context.Context, h *handle) (bool, error) {
	req := &groupReq{h: h}
	if err := be.deletes.Do(ctx, req); err != nil {
		return false, err
	}
	return req.ok, nil
}

// groupRun wraps a group's statement: QueryTimeout, retries of a retryable failure (deadlockTries), and
// every request's outcome reset before each try.
func (be *Backend) groupRun(exec func(context.Context, []*groupReq) error) func(context.Context, []*groupReq) error {
	return func(ctx context.Context, reqs []*groupReq) error {
		return be.attempt(ctx, func(ctx context.Context) error {
			for _, q := range reqs {
				q.ok = false
			}
			return exec(ctx, reqs)
		})
	}
}

// execDeletes runs the Ack/Drop of a group of claims: a lone unordered, non-Exclusive claim
// in one DELETE; otherwise one transaction that locks the keys of ordered batches, locks the
// rows, deletes those whose lease held, releases their Exclusive locks and makes the next
// row of each key due. A claim is marked settled only once the whole succeeded.
func (be *Backend) execDeletes(ctx context.Context, reqs []*groupReq) error {
	if len(reqs) == 1 && !reqs[0].h.excl && reqs[0].h.key == "" {
		h := reqs[0].h
		n, err := affected(ctx, be.db, be.sql.ackOne, h.id, h.token)
		if err != nil {
			return err
		}
		if n > 0 {
			reqs[0].ok = true
			h.MarkSettled()
			if h.limited {
				be.wake.Signal(h.queue)
			}
		}
		return nil
	}
	var wake []string
	err := inTx(ctx, be.db, isolation(len(keysOf(reqs)) > 0), func(tx *sql.Tx) error {
		wake = wake[:0]
		if err := be.lockKeys(ctx, tx, keysOf(reqs)); err != nil {
			return err
		}
		held, _, err := be.lockRows(ctx, tx, reqs)
		if err != nil || len(held) == 0 {
			return err
		}
		ids := make([]int64, len(held))
		for i, q := range held {
			ids[i] = q.h.id
		}
		if _, err := tx.ExecContext(ctx, withIDTable(be.sql.deleteRows, len(ids)), int64Args(ids)...); err != nil {
			return err
		}
		for _, q := range held {
			if q.h.excl {
				if _, err := tx.ExecContext(ctx, be.sql.exclusiveRelease, q.h.queue, q.h.id); err != nil {
					return err
				}
				wake = append(wake, q.h.queue)
			}
			if q.h.key != "" {
				promoted, err := be.promoteNext(ctx, tx, q.h.queue, q.h.key, q.h.id)
				if err != nil {
					return err
				}
				if promoted {
					wake = append(wake, q.h.queue)
				}
			}
		}
		return nil
	})
	if err != nil {
		for _, q := range reqs {
			q.ok = false
		}
		return err
	}
	for _, q := range reqs {
		if q.ok {
			q.h.MarkSettled()
			if q.h.limited {
				wake = append(wake, q.h.queue)
			}
		}
	}
	for _, q := range wake {
		be.wake.Signal(q)
	}
	return nil
}

// lockRows locks the rows of reqs by primary key, marks ok the requests whose lease holds and
// returns them, with the database's now.
func (be *Backend) lockRows(ctx context.Context, tx *sql.Tx, reqs []*groupReq) ([]*groupReq, int64, error) {
	ids := make([]int64, len(reqs))
	for i, q := range reqs {
		ids[i] = q.h.id
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	type row struct {
		token int64
		live  bool
	}
	found := make(map[int64]row, len(reqs))
	var (
		id, now int64
		token   sql.NullInt64
		live    bool
	)
	rows, err := tx.QueryContext(ctx, withMarks(be.sql.lockRows, len(ids)), int64Args(ids)...)
	err = eachRow(rows, err, []any{&id, &token, &live, &now}, func() error {
		found[id] = row{token: token.Int64, live: token.Valid && live}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	var held []*groupReq
	for _, q := range reqs {
		if r, ok := found[q.h.id]; ok && r.live && r.token == q.h.token {
			q.ok = true
			held = append(held, q)
		}
	}
	return held, now, nil
}

// execExtends moves the leases of a group of claims in one transaction: it locks the rows,
// and gives those whose lease holds the database's now plus their lease (and moves their
// Exclusive locks with them).
func (be *Backend) execExtends(ctx context.Context, reqs []*groupReq) error {
	return inTx(ctx, be.db, nil, func(tx *sql.Tx) error {
		held, now, err := be.lockRows(ctx, tx, reqs)
		if err != nil || len(held) == 0 {
			return err
		}
		var cases strings.Builder
		args := make([]any, 0, 3*len(held))
		ids := make([]any, 0, len(held))
		for _, q := range held {
			cases.WriteString(" WHEN ? THEN ?")
			args = append(args, q.h.id, now+q.lease)
			ids = append(ids, q.h.id)
		}
		stmt := "UPDATE " + qualifier(be.o.Schema) + "txmq_jobs FORCE INDEX (PRIMARY) SET run_at = CASE id" + cases.String() + " END WHERE id IN (" + marks(len(ids)) + ")"
		if _, err := tx.ExecContext(ctx, stmt, append(args, ids...)...); err != nil {
			return err
		}
		for _, q := range held {
			q.until = time.UnixMicro(now + q.lease)
			if q.h.excl {
				if _, err := tx.ExecContext(ctx, be.sql.exclusiveExtend, now+q.lease, q.h.queue, q.h.id); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// settle runs a settling statement for c once; see settleOrExtend.
func (be *Backend) settle(ctx context.Context, op string, c *core.Claim, apply func(context.Context, *handle) (bool, error)) error {
	return be.settleOrExtend(ctx, op, c, true, apply)
}

// settleOrExtend checks c's handle, does nothing for a claim already settled, and runs apply
// (which bounds its statement by QueryTimeout), whose false result (no row matched the id,
// token and a live lease) becomes an error wrapping core.ErrLeaseLost. A successful settle
// marks the claim settled.
func (be *Backend) settleOrExtend(ctx context.Context, op string, c *core.Claim, settles bool, apply func(context.Context, *handle) (bool, error)) error {
	if c == nil {
		return fmt.Errorf("%w: mysql: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, op)
	}
	if err := be.usable(op + " " + c.String()); err != nil {
		return err
	}
	h, ok := c.Handle.(*handle)
	if !ok || h == nil || h.be.o.Schema != be.o.Schema {
		return fmt.Errorf("%w: mysql: %s %s: the claim was not handed out by a mysql backend on schema %q; settle a claim with the backend type that fetched it", core.ErrInvalidConfig, op, c.String(), be.o.Schema)
	}
	return be.call.Settle(&h.Settlement, op, c, settles, func() (bool, error) { return apply(ctx, h) })
}
