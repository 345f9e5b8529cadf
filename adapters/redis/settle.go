package redis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq/core"
)

// handle is the Claim.Handle of every claim this package hands out: the lease token the claim
// script stored for the batch. A settle or extension succeeds only while the batch still holds
// this token and its lease has not ended, so a node whose lease ran out (and whose batch may
// run elsewhere under a new token) cannot touch it. settled is set by the first successful
// Ack, Retry or Drop, making later settles from the same claim no-ops.
type handle struct {
	owner *Backend
	token string
	// exclusive: claimed as the batch of an Exclusive queue or of one with a cluster-wide
	// limit (clusterlimit.go): its settle frees a slot, so it wakes the waiting fetches.
	exclusive bool
	// fair: claimed by a fair claim (fair.go): its settle tells the script to keep the
	// queue's turn (ARGV[2]).
	fair bool
	// idArg and tokenArg are the batch id and token as the claim reply held them (boxed),
	// passed back as the settle script's arguments without boxing them again per settle.
	idArg, tokenArg any

	mu      sync.Mutex
	settled bool
}

// Ack removes a successfully processed batch.
func (be *Backend) Ack(ctx context.Context, c *core.Claim) error {
	return be.settle(ctx, "ack", c, opAck, 0, nil)
}

// Drop removes a batch the engine has given up on; reason is not kept (the engine records it in its
// dead-letter sink and metrics).
func (be *Backend) Drop(ctx context.Context, c *core.Claim, reason string) error {
	return be.settle(ctx, "drop ("+reason+")", c, opAck, 0, nil)
}

// Retry releases the claim and stores body as the batch's new body (a rewrite: Deliveries
// restarts at 0), claimable again after delay, measured on the server's clock. A nil body
// keeps the stored body and its Deliveries count (a retry in place).
func (be *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	return be.settle(ctx, "retry", c, opRetry, delay, body)
}

// Extend pushes the claim's lease to now+lease (core.LeaseOr: the default when lease <= 0) on the
// server's clock, and updates c.LeaseUntil (on this machine's clock, measured from before the
// call and truncated to the server's millisecond, so it never runs past the server's; see
// leaseEnd). Extending a claim already settled by its holder is a no-op.
func (be *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	lease = core.LeaseOr(lease)
	start := time.Now()
	h, err := be.hold("extend", c)
	if err != nil || h == nil {
		return err
	}
	defer h.mu.Unlock()
	if err := be.runSettle(ctx, "extend", c, h, opExtend, lease, nil); err != nil {
		return err
	}
	c.LeaseUntil = leaseEnd(start, millisUp(lease))
	return nil
}

// settle runs the settle script for op unless the claim was already settled (a no-op).
func (be *Backend) settle(ctx context.Context, what string, c *core.Claim, op string, d time.Duration, body []byte) error {
	h, err := be.hold(what, c)
	if err != nil || h == nil {
		return err
	}
	defer h.mu.Unlock()
	if err := be.runSettle(ctx, what, c, h, op, d, body); err != nil {
		return err
	}
	h.settled = true
	return nil
}

// hold checks the claim and returns its handle locked, or nil (and a nil error) when the
// claim was already settled.
func (be *Backend) hold(what string, c *core.Claim) (*handle, error) {
	if err := be.usable(what, c.QueueName()); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: redis: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, what)
	}
	h, ok := c.Handle.(*handle)
	if !ok || h == nil || h.owner == nil || h.owner.keys.prefix != be.keys.prefix {
		return nil, fmt.Errorf("%w: redis: %s %s: the claim was not handed out by a Redis backend with prefix %q; settle a claim with the backend that fetched it", core.ErrInvalidConfig, what, c.String(), be.keys.prefix)
	}
	h.mu.Lock()
	if h.settled {
		h.mu.Unlock()
		return nil, nil
	}
	return h, nil
}

// runSettle runs the settle script for op on c with h locked, mapping a lost lease to an error
// wrapping core.ErrLeaseLost.
func (be *Backend) runSettle(ctx context.Context, what string, c *core.Claim, h *handle, op string, d time.Duration, body []byte) error {
	k := be.keys.keys(c.Queue)
	ms := millisUp(d)
	hasBody := argZero
	if body != nil {
		hasBody = argOne
	}
	// A retry may make the batch due at once; settling an exclusive (or limited) batch frees
	// the queue (a slot of it): both wake fetches waiting on it. A plain ack frees nothing anyone waits for.
	notify := argZero
	if op == opRetry || h.exclusive {
		notify = argOne
	}
	id, tok := h.idArg, h.tokenArg
	if s, ok := id.(string); !ok || s != c.ID { // not set, or the claim's id was changed
		id = c.ID
	}
	if s, ok := tok.(string); !ok || s != h.token {
		tok = h.token
	}
	args, nargs := [settleArgs]any{id, tok, opArg(op), ms, hasBody, body, notify}, settleArgs
	if op == opAck { // the short form: id, token, op
		args[2], nargs = argAckShort, ackArgs
		if notify == argOne {
			args[2] = argAckShortWake
		}
	}
	res, err := be.settles.run(ctx, k, args, nargs, h.fair)
	if err != nil {
		return be.wrap(fmt.Sprintf("%s %s", what, c.String()), err)
	}
	if res < 0 {
		return fmt.Errorf("redis: %s %s (delivery %d): the lease ran out and the batch may already run elsewhere; do not settle it again: %w",
			what, c.String(), c.Deliveries, core.ErrLeaseLost)
	}
	return nil
}

// millisUp returns d in whole milliseconds, rounded up (0 for d <= 0): the retry delay or
// lease a settle script is given.
func millisUp(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// The settle script's constant arguments, boxed once: boxing a string per settle is an
// allocation each, and a one-message batch settles once per message.
var (
	argZero   any = "0"
	argOne    any = "1"
	argAck    any = opAck
	argRetry  any = opRetry
	argExtend any = opExtend

	argAckShort     any = opAckShort
	argAckShortWake any = opAckShortWake
)

// opArg returns op boxed (one of the pre-boxed constants for the settle operations).
func opArg(op string) any {
	switch op {
	case opAck:
		return argAck
	case opRetry:
		return argRetry
	case opExtend:
		return argExtend
	}
	return op
}
