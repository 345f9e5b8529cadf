package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

// lease is the Claim.Handle of every claim this Backend hands out: one per handout, so a new
// lease on the same record tells the current holder from an old one (record.lease is the
// current one). settled is set by the first successful Ack, Retry or Drop.
type lease struct {
	owner   *Backend
	rec     *record
	node    string
	settled bool
}

// Ack removes a successfully processed batch.
func (be *Backend) Ack(ctx context.Context, c *core.Claim) error {
	return be.settle(ctx, "ack", c, func(q *queue, r *record, now time.Time) {
		r.state, r.body = stateGone, nil
		q.finishKeyed(r, now)
	})
}

// Drop removes a batch the engine has given up on; reason is not kept.
func (be *Backend) Drop(ctx context.Context, c *core.Claim, reason string) error {
	return be.settle(ctx, "drop", c, func(q *queue, r *record, now time.Time) {
		r.state, r.body = stateGone, nil
		q.finishKeyed(r, now)
	})
}

// Retry releases the claim and stores body as the batch's new body (a rewrite: Deliveries
// restarts at 0), claimable again after delay. A nil body keeps the stored body and its
// Deliveries count (a retry in place).
func (be *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	return be.settle(ctx, "retry", c, func(q *queue, r *record, now time.Time) {
		if body != nil {
			r.body = clone(body)
			r.deliveries = 0
		}
		if delay > 0 {
			q.pushDelayed(r, now.Add(delay))
		} else {
			q.pushReady(r, now)
		}
	})
}

// Extend pushes the claim's lease to now+lease (core.LeaseOr: the default when lease <= 0) and
// updates c.LeaseUntil. Extending a claim already settled by its holder is a no-op.
func (be *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: extend %s: %w", c.String(), err)
	}
	lease = core.LeaseOr(lease)
	be.mu.Lock()
	defer be.mu.Unlock()
	l, now, err := be.holdLocked("extend", c)
	if err != nil || l == nil {
		return err
	}
	r := l.rec
	r.at = now.Add(lease)
	r.q.inflight.fix(r.idx)
	c.LeaseUntil = r.at
	return nil
}

// settle runs apply on the claim's record after taking it out of flight, unless the claim was
// already settled (a no-op) or its lease was lost (ErrLeaseLost). apply leaves the record
// gone, ready or delayed. Every settle wakes fetches blocked on the queue: it frees an
// Exclusive queue and may make the batch ready again.
func (be *Backend) settle(ctx context.Context, op string, c *core.Claim, apply func(q *queue, r *record, now time.Time)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %s %s: %w", op, c.String(), err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	l, now, err := be.holdLocked(op, c)
	if err != nil || l == nil {
		return err
	}
	r := l.rec
	r.q.release(r)
	l.settled = true
	apply(r.q, r, now)
	r.q.notify()
	return nil
}

// holdLocked checks that c's lease is current and unexpired and returns it with the time of
// the check. It returns a nil lease and nil error for a claim its holder already settled, and
// an error wrapping core.ErrLeaseLost when the lease expired (the record is put back as ready
// at once) or the batch was handed out again since.
func (be *Backend) holdLocked(op string, c *core.Claim) (*lease, time.Time, error) {
	if err := be.usableLocked(op, c.QueueName()); err != nil {
		return nil, time.Time{}, err
	}
	if c == nil {
		return nil, time.Time{}, fmt.Errorf("%w: memory: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, op)
	}
	l, ok := c.Handle.(*lease)
	if !ok || l == nil || l.owner != be {
		return nil, time.Time{}, fmt.Errorf("%w: memory: %s %s: the claim was not handed out by this backend; settle a claim with the backend that fetched it", core.ErrInvalidConfig, op, c.String())
	}
	if l.settled {
		return nil, time.Time{}, nil
	}
	now := be.clock()
	r := l.rec
	q := r.q
	if r.lease == l && !now.Before(r.at) {
		// Expired but not yet noticed: the whole queue catches up, this record included.
		if q.advance(now) {
			q.notify()
		}
	}
	if r.lease != l {
		return nil, time.Time{}, fmt.Errorf("memory: %s %s (delivery %d): the lease ran out and the batch may already run elsewhere; do not settle it again: %w",
			op, c.String(), c.Deliveries, core.ErrLeaseLost)
	}
	return l, now, nil
}
