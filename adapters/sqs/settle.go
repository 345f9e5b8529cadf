package sqs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// handle is the Claim.Handle of every claim this Backend hands out: the receipt handle of
// one receive, and what a settle needs to move or delete the message.
type handle struct {
	queue     string
	k         kind // kindStandard or kindFIFO
	exclusive bool
	url       string
	receipt   string
	w         wire
	count     int // ApproximateReceiveCount of this receive
	lease     time.Duration

	mu      sync.Mutex // serialises settles and extensions of one claim
	settled bool
}

// Ack deletes a processed batch (and its overflow body).
func (be *Backend) Ack(ctx context.Context, c *core.Claim) error {
	return be.remove(ctx, "ack", c)
}

// Drop deletes a batch the engine gave up on; reason is only logged.
func (be *Backend) Drop(ctx context.Context, c *core.Claim, reason string) error {
	be.log.Debug("sqs: dropping batch", "queue", c.QueueName(), "reason", reason)
	return be.remove(ctx, "drop", c)
}

func (be *Backend) remove(ctx context.Context, op string, c *core.Claim) error {
	h, err := be.hold(op, c)
	if err != nil || h == nil {
		return err
	}
	defer h.mu.Unlock()
	if err := be.deleteMsg(ctx, h.url, h.receipt); err != nil {
		return wrapSettle(op, c, err)
	}
	h.settled = true
	if h.w.overflow != "" {
		be.forgetOverflow(h.w)
	}
	return nil
}

// Retry releases the claim; the batch is claimable again after delay.
//
// On a standard queue with 0 < delay <= 12 h the retry is in place: ChangeMessageVisibility
// hides the same message for the delay, keeping its old body, and its receive count goes on
// counting (the engine counts a run as the envelope's attempt plus Deliveries, so the count stays
// right). Otherwise it is a rewrite: body is sent as a new message (through the holding queue
// when the delay needs it) with Deliveries restarting at 0, then the old message is deleted.
// Exclusive queues always rewrite, so the FIFO group is free during the delay, except for a
// keyed batch (an Ordered queue), which is always retried in place, the delay capped at
// MaxVisibility, so it stays the head of its key (and of an Exclusive queue). A delay of 0
// rewrites too: the engine passes an attempt count that does not count the run it gives back (a
// node closing), which only a rewrite can express.
func (be *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	h, err := be.hold("retry", c)
	if err != nil || h == nil {
		return err
	}
	defer h.mu.Unlock()
	if h.w.key != "" {
		// A keyed batch is retried in place whatever the delay (capped at MaxVisibility),
		// so it stays the head of its key through its backoff (see "Ordering").
		if err := be.changeVisibility(ctx, h.url, h.receipt, seconds(min(delay, MaxVisibility), MaxVisibility)); err != nil {
			return wrapSettle("retry", c, err)
		}
		h.settled = true
		return nil
	}
	if !h.exclusive && delay > 0 && delay <= MaxVisibility {
		if err := be.changeVisibility(ctx, h.url, h.receipt, seconds(delay, MaxVisibility)); err != nil {
			return wrapSettle("retry", c, err)
		}
		h.settled = true
		return nil
	}
	w := h.w
	if body == nil {
		w.base += h.count
	} else {
		if w, err = be.encode(ctx, h.queue, h.w.id, body); err != nil {
			return err
		}
	}
	if err := be.route(ctx, h.queue, h.exclusive, w, delay, ""); err != nil {
		if w.overflow != h.w.overflow {
			be.forgetOverflow(w)
		}
		return err
	}
	// The new message exists from here on: the old one must go.
	h.settled = true
	if err := be.deleteMsg(ctx, h.url, h.receipt); err != nil {
		return fmt.Errorf("sqs: retry %s: the batch was re-sent but its old message could not be deleted, so it may run twice: %w", c.String(), wrapSettle("retry", c, err))
	}
	if h.w.overflow != "" && w.overflow != h.w.overflow {
		be.forgetOverflow(h.w)
	}
	return nil
}

// Extend pushes the claim's visibility timeout to now+lease (rounded up to whole seconds) and
// updates c.LeaseUntil. Extending a claim already settled is a no-op.
func (be *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	h, err := be.hold("extend", c)
	if err != nil || h == nil {
		return err
	}
	defer h.mu.Unlock()
	if lease <= 0 {
		lease = h.lease
	}
	vis := visibility(lease)
	start := time.Now()
	if err := be.changeVisibility(ctx, h.url, h.receipt, vis); err != nil {
		return wrapSettle("extend", c, err)
	}
	c.LeaseUntil = leaseEnd(start, vis)
	return nil
}

// hold checks that c can be settled or extended and returns its handle locked. It returns a
// nil handle and nil error for a claim already settled, and an error wrapping
// core.ErrLeaseLost for a claim whose lease ran out: SQS may accept a stale receipt handle
// (DeleteMessage on a handle from an earlier receive can succeed without deleting anything,
// or delete a message another node now runs), so the lease is also checked on this side,
// against LeaseUntil, which is never later than SQS's own deadline.
func (be *Backend) hold(op string, c *core.Claim) (*handle, error) {
	if err := be.usable(op, c.QueueName()); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: sqs: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, op)
	}
	h, ok := c.Handle.(*handle)
	if !ok || h == nil {
		return nil, fmt.Errorf("%w: sqs: %s %s: the claim was not handed out by an SQS backend; settle a claim with the backend that fetched it", core.ErrInvalidConfig, op, c.String())
	}
	h.mu.Lock()
	if h.settled {
		h.mu.Unlock()
		return nil, nil
	}
	if !time.Now().Before(c.LeaseUntil) {
		h.mu.Unlock()
		return nil, fmt.Errorf("sqs: %s %s (delivery %d): the lease ran out at %s and the batch may already run elsewhere; do not settle it again: %w",
			op, c.String(), c.Deliveries, c.LeaseUntil.Format(time.RFC3339Nano), core.ErrLeaseLost)
	}
	return h, nil
}
