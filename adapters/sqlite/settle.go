package sqlite

import (
	"context"
	"database/sql"
	"fmt"
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
	// wake the fetches waiting for the queue.
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
// path of a lone Ack or Drop.
const sqlAckOne = `DELETE FROM txmq_jobs WHERE id = :id AND lease_token = :token AND run_at > :now`

// sqlLockRows reads a group's rows by primary key (inside the group's transaction, which holds
// the write lock) and reports whose lease holds.
const sqlLockRows = `SELECT id, lease_token, run_at > :now FROM txmq_jobs WHERE id IN ({{in}})`

// sqlDeleteRows deletes the rows of a group whose lease held, by primary key.
const sqlDeleteRows = `DELETE FROM txmq_jobs WHERE id IN ({{in}})`

// sqlExclusiveRelease releases an Exclusive queue's lock held for a job.
const sqlExclusiveRelease = `UPDATE txmq_jobs_exclusive SET lease_until = 0 WHERE queue = :queue AND job_id = :job`

// sqlExclusiveExtend moves an Exclusive queue's lock with its job's lease.
const sqlExclusiveExtend = `UPDATE txmq_jobs_exclusive SET lease_until = :until WHERE queue = :queue AND job_id = :job`

// sqlRetry releases a live lease: the batch is claimable again after the delay, with the new
// body and deliveries restarted (a rewrite), or, for a NULL body, as it was (in place).
const sqlRetry = `
UPDATE txmq_jobs
SET body = COALESCE(:body, body), deliveries = CASE WHEN :inplace THEN deliveries ELSE 0 END,
	run_at = :now + :delay, lease_token = NULL, lease_owner = NULL
WHERE id = :id AND lease_token = :token AND run_at > :now`

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
		args := []any{nowArg(), sql.Named("body", newBody), sql.Named("inplace", body == nil), sql.Named("delay", micros(max(delay, 0))),
			sql.Named("id", h.id), sql.Named("token", h.token)}
		var n int64
		err := be.attempt(ctx, func(ctx context.Context) error {
			if !h.excl {
				var err error
				n, err = be.exec(ctx, sqlRetry, args...)
				return err
			}
			return be.inTx(ctx, func(tx execer) error {
				var err error
				if n, err = affected(ctx, tx, sqlRetry, args...); err != nil || n == 0 {
					return err
				}
				_, err = tx.ExecContext(ctx, sqlExclusiveRelease, sql.Named("queue", h.queue), sql.Named("job", h.id))
				return err
			})
		})
		if n > 0 {
			be.wake.Signal(h.queue)
		}
		return n > 0, err
	})
}

// Extend pushes the claim's lease (and its Exclusive lock) to now+lease (core.LeaseOr: the
// default when lease <= 0), and updates c.LeaseUntil. Extending a claim its holder already
// settled is a no-op. Concurrent extensions share one transaction.
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

// groupRun wraps a group's statement: QueryTimeout, one retry of a retryable failure, and
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
// in one DELETE; otherwise one transaction that reads the rows, deletes those whose lease
// held, releases their Exclusive locks and makes the next row of each key due. A claim is
// marked settled only once the whole succeeded.
func (be *Backend) execDeletes(ctx context.Context, reqs []*groupReq) error {
	if len(reqs) == 1 && !reqs[0].h.excl && reqs[0].h.key == "" {
		h := reqs[0].h
		n, err := be.exec(ctx, sqlAckOne, nowArg(), sql.Named("id", h.id), sql.Named("token", h.token))
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
	err := be.inTx(ctx, func(tx execer) error {
		wake = wake[:0]
		now := time.Now().UnixMicro()
		held, err := be.lockRows(ctx, tx, reqs, now)
		if err != nil || len(held) == 0 {
			return err
		}
		ids := make([]int64, len(held))
		for i, q := range held {
			ids[i] = q.h.id
		}
		if _, err := tx.ExecContext(ctx, withList(sqlDeleteRows, "id", len(ids)), listArgs("id", ids)...); err != nil {
			return err
		}
		for _, q := range held {
			if q.h.limited {
				wake = append(wake, q.h.queue)
			}
			if q.h.excl {
				if _, err := tx.ExecContext(ctx, sqlExclusiveRelease, sql.Named("queue", q.h.queue), sql.Named("job", q.h.id)); err != nil {
					return err
				}
				wake = append(wake, q.h.queue)
			}
			if q.h.key != "" {
				promoted, err := promoteNext(ctx, tx, q.h.queue, q.h.key, q.h.id, now)
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
		}
	}
	for _, q := range wake {
		be.wake.Signal(q)
	}
	return nil
}

// lockRows reads the rows of reqs by primary key in tx (which holds the write lock), marks
// ok the requests whose lease holds at now and returns them.
func (be *Backend) lockRows(ctx context.Context, tx execer, reqs []*groupReq, now int64) ([]*groupReq, error) {
	ids := make([]int64, len(reqs))
	for i, q := range reqs {
		ids[i] = q.h.id
	}
	type row struct {
		token int64
		live  bool
	}
	found := make(map[int64]row, len(reqs))
	var (
		id    int64
		token sql.NullInt64
		live  bool
	)
	rows, err := tx.QueryContext(ctx, withList(sqlLockRows, "id", len(ids)), append(listArgs("id", ids), sql.Named("now", now))...)
	err = eachRow(rows, err, []any{&id, &token, &live}, func() error {
		found[id] = row{token: token.Int64, live: token.Valid && live}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var held []*groupReq
	for _, q := range reqs {
		if r, ok := found[q.h.id]; ok && r.live && r.token == q.h.token {
			q.ok = true
			held = append(held, q)
		}
	}
	return held, nil
}

// execExtends moves the leases of a group of claims in one transaction: it reads the rows,
// and gives those whose lease holds now plus their lease (and moves their Exclusive locks
// with them).
func (be *Backend) execExtends(ctx context.Context, reqs []*groupReq) error {
	return be.inTx(ctx, func(tx execer) error {
		now := time.Now().UnixMicro()
		held, err := be.lockRows(ctx, tx, reqs, now)
		if err != nil || len(held) == 0 {
			return err
		}
		var cases strings.Builder
		args := make([]any, 0, 2*len(held))
		ids := make([]int64, 0, len(held))
		for i, q := range held {
			fmt.Fprintf(&cases, " WHEN :e%d THEN :u%d", i, i)
			args = append(args, sql.Named(fmt.Sprint("e", i), q.h.id), sql.Named(fmt.Sprint("u", i), now+q.lease))
			ids = append(ids, q.h.id)
		}
		stmt := "UPDATE txmq_jobs SET run_at = CASE id" + cases.String() + " END WHERE id IN (" + list("id", len(ids)) + ")"
		if _, err := tx.ExecContext(ctx, stmt, append(args, listArgs("id", ids)...)...); err != nil {
			return err
		}
		for _, q := range held {
			q.until = time.UnixMicro(now + q.lease)
			if q.h.excl {
				if _, err := tx.ExecContext(ctx, sqlExclusiveExtend, sql.Named("until", now+q.lease), sql.Named("queue", q.h.queue), sql.Named("job", q.h.id)); err != nil {
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
		return fmt.Errorf("%w: sqlite: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, op)
	}
	if err := be.usable(op + " " + c.String()); err != nil {
		return err
	}
	h, ok := c.Handle.(*handle)
	if !ok || h == nil {
		return fmt.Errorf("%w: sqlite: %s %s: the claim was not handed out by a sqlite backend; settle a claim with the backend type that fetched it", core.ErrInvalidConfig, op, c.String())
	}
	return be.call.Settle(&h.Settlement, op, c, settles, func() (bool, error) { return apply(ctx, h) })
}
