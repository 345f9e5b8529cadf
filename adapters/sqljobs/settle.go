package sqljobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlcall"
)

// handle is the Claim.Handle of every claim: the row and the lease token of this handout.
// The token is new per claim (a sequence), so an earlier holder's token never matches the
// row again. settled is set by the first successful Ack, Retry or Drop (even one whose caller
// stopped waiting), which makes a later settle of the same claim a no-op.
type handle struct {
	be    *Backend
	id    int64
	token int64
	excl  bool // claimed as an Exclusive or limited queue's batch: its extensions commit durably
	// limited: claimed as the batch of a queue with a cluster-wide limit (clusterlimit.go): its
	// Ack and Drop wake the nodes waiting for the queue.
	limited bool
	// queue and key name an ordered queue's batch (key empty otherwise): its Ack and Drop
	// make the next batch of the key due (deleteKeyed).
	queue, key string

	sqlcall.Settlement // serialises settles and extensions; settled once
}

// Ack deletes a successfully processed batch and releases its Exclusive lock. Concurrent
// Acks and Drops share one statement (see Options.SettleWindow); each returns its own
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
		var n int
		err := be.attempt(ctx, func(ctx context.Context) error {
			rows, err := query(ctx, be.on(be.pool), be.sql.retry, h.id, h.token, body, micros(max(delay, 0)), be.channel)
			if err != nil {
				return err
			}
			n, err = countRows(rows)
			return err
		})
		return n > 0, err
	})
}

// Extend pushes the claim's lease (and its Exclusive lock) to now+lease, by the database's
// clock (core.LeaseOr: the default when lease <= 0), and updates c.LeaseUntil. Extending a claim
// its holder already settled is a no-op. Concurrent extensions share one statement.
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
	if h.key != "" {
		return be.deleteKeyed(ctx, h) // wakes the queue's waiting nodes by itself
	}
	if h.limited {
		defer be.wakeLimited(ctx, h.queue)
	}
	req := &groupReq{h: h}
	if err := be.deletes.Do(ctx, req); err != nil {
		return false, err
	}
	return req.ok, nil
}

// execDeletes runs the Ack/Drop statement for a group of claims. A claim whose row it
// deleted is marked settled only once the statement succeeded as a whole.
func (be *Backend) execDeletes(ctx context.Context, reqs []*groupReq) error {
	ids, tokens := make([]int64, len(reqs)), make([]int64, len(reqs))
	for i, q := range reqs {
		ids[i], tokens[i] = q.h.id, q.h.token
	}
	rows, err := query(ctx, be.on(be.pool), be.sql.ack, ids, tokens, be.channel, be.syncCommit(false))
	if err != nil {
		return err
	}
	held := make(map[[2]int64]bool, len(reqs))
	var id, token, notified int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &token, &notified}, func() error {
		held[[2]int64{id, token}] = true
		return nil
	}); err != nil {
		return err
	}
	for _, q := range reqs {
		if held[[2]int64{q.h.id, q.h.token}] {
			q.ok = true
			q.h.MarkSettled()
		}
	}
	return nil
}

// execExtends runs the Extend statement for a group of claims.
func (be *Backend) execExtends(ctx context.Context, reqs []*groupReq) error {
	ids, tokens, leases := make([]int64, len(reqs)), make([]int64, len(reqs)), make([]int64, len(reqs))
	excl := false
	for i, q := range reqs {
		ids[i], tokens[i], leases[i] = q.h.id, q.h.token, q.lease
		excl = excl || q.h.excl
	}
	rows, err := query(ctx, be.on(be.pool), be.sql.extend, ids, tokens, leases, be.syncCommit(excl))
	if err != nil {
		return err
	}
	until := make(map[[2]int64]time.Time, len(reqs))
	var (
		id, token int64
		at        time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &token, &at}, func() error {
		until[[2]int64{id, token}] = at
		return nil
	}); err != nil {
		return err
	}
	for _, q := range reqs {
		if at, ok := until[[2]int64{q.h.id, q.h.token}]; ok {
			q.ok, q.until = true, at
		}
	}
	return nil
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
	if err := be.usable(op + " " + c.String()); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("%w: sqljobs: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, op)
	}
	h, ok := c.Handle.(*handle)
	if !ok || h == nil || h.be.o.Schema != be.o.Schema {
		return fmt.Errorf("%w: sqljobs: %s %s: the claim was not handed out by a sqljobs backend on schema %q; settle a claim with the backend type that fetched it", core.ErrInvalidConfig, op, c.String(), be.o.Schema)
	}
	return be.call.Settle(&h.Settlement, op, c, settles, func() (bool, error) { return apply(ctx, h) })
}

// countRows reads and counts a result's rows.
func countRows(rows pgx.Rows) (int, error) {
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	return n, rows.Err()
}
