package sqljobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// handle is the Claim.Handle of every claim: the row and the lease token of this handout.
// The token is new per claim (a sequence), so an earlier holder's token never matches the
// row again. settled is set by the first successful Ack, Retry or Drop, which makes a second
// settle of the same claim a no-op.
type handle struct {
	be    *Backend
	id    int64
	token int64

	mu      sync.Mutex // serialises settles and extensions of this claim
	settled bool
}

// Ack deletes a successfully processed batch and releases its Exclusive lock.
func (be *Backend) Ack(ctx context.Context, c *core.Claim) error {
	return be.settle(ctx, "ack", c, func(ctx context.Context, h *handle) (bool, error) {
		return be.deleteLeased(ctx, h)
	})
}

// Drop deletes a batch core has given up on (reason is for logs only) and releases its
// Exclusive lock.
func (be *Backend) Drop(ctx context.Context, c *core.Claim, reason string) error {
	return be.settle(ctx, "drop ("+reason+")", c, func(ctx context.Context, h *handle) (bool, error) {
		return be.deleteLeased(ctx, h)
	})
}

// Retry releases the claim and its Exclusive lock; the batch is claimable again after delay.
// A non-nil body is stored as the batch's new body and Deliveries restarts at 0 (a rewrite);
// a nil body keeps the stored body and its Deliveries count (a retry in place).
func (be *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	return be.settle(ctx, "retry", c, func(ctx context.Context, h *handle) (bool, error) {
		rows, err := be.pool.Query(ctx, be.sql.retry, h.id, h.token, body, micros(max(delay, 0)), be.channel)
		if err != nil {
			return false, err
		}
		n, err := countRows(rows)
		return n > 0, err
	})
}

// Extend pushes the claim's lease (and its Exclusive lock) to now+lease, by the database's
// clock (Options.DefaultLease when lease <= 0), and updates c.LeaseUntil. Extending a claim
// its holder already settled is a no-op.
func (be *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	if lease <= 0 {
		lease = be.o.DefaultLease
	}
	var until time.Time
	return be.settleOrExtend(ctx, "extend", c, false, func(ctx context.Context, h *handle) (bool, error) {
		err := be.pool.QueryRow(ctx, be.sql.extend, h.id, h.token, micros(lease)).Scan(&until)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err == nil {
			c.LeaseUntil = until
		}
		return err == nil, err
	})
}

// deleteLeased runs the Ack/Drop statement; true means the lease held and the row is gone.
func (be *Backend) deleteLeased(ctx context.Context, h *handle) (bool, error) {
	rows, err := be.pool.Query(ctx, be.sql.ack, h.id, h.token, be.channel)
	if err != nil {
		return false, err
	}
	n, err := countRows(rows)
	return n > 0, err
}

// settle runs a settling statement for c once; see settleOrExtend.
func (be *Backend) settle(ctx context.Context, op string, c *core.Claim, apply func(context.Context, *handle) (bool, error)) error {
	return be.settleOrExtend(ctx, op, c, true, apply)
}

// settleOrExtend checks c's handle, does nothing for a claim already settled, and runs apply,
// whose false result (no row matched the id, token and a live lease) becomes an error
// wrapping core.ErrLeaseLost. A successful settle marks the claim settled.
func (be *Backend) settleOrExtend(ctx context.Context, op string, c *core.Claim, settles bool, apply func(context.Context, *handle) (bool, error)) error {
	if err := be.usable(op + " " + describe(c)); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("%w: sqljobs: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, op)
	}
	h, ok := c.Handle.(*handle)
	if !ok || h == nil || h.be.o.Schema != be.o.Schema {
		return fmt.Errorf("%w: sqljobs: %s %s: the claim was not handed out by a sqljobs backend on schema %q; settle a claim with the backend type that fetched it", core.ErrInvalidConfig, op, describe(c), be.o.Schema)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.settled {
		return nil
	}
	var held bool
	err := be.run(ctx, op+" "+describe(c), func(ctx context.Context) error {
		var err error
		held, err = apply(ctx, h)
		return err
	})
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("sqljobs: %s %s (delivery %d): the lease ran out or the batch was handed out again, and it may already run elsewhere; do not settle it again: %w",
			op, describe(c), c.Deliveries, core.ErrLeaseLost)
	}
	if settles {
		h.settled = true
	}
	return nil
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
