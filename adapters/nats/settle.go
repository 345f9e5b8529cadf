package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/core"
)

// Acknowledgement bodies of the JetStream protocol.
var (
	ackAck      = []byte("+ACK")
	ackProgress = []byte("+WPI")
)

// handle is the Claim.Handle of every claim: one per delivery.
//
// JetStream accepts an acknowledgement for a message from whoever sends it to the message's
// reply subject, even the holder of an earlier delivery whose AckWait ran out (the server
// keys acks by stream sequence; the delivery count in the reply subject is not checked). So
// the lease is tracked here: leaseUntil is a conservative estimate of the server's deadline
// (timed from before the request that delivered or extended it), and a settle or extension
// within LeaseMargin of it, or after it, is refused with core.ErrLeaseLost without contacting
// the server. Every other settle and extension is a request the server answers (a "double
// ack"), so success means the server applied it; an Ack is a plain +ACK confirmed as read by
// the server with a shared round trip (see flushGroup): an Ack the server read but could not
// apply leaves the batch to run again after its AckWait, which at-least-once allows.
type handle struct {
	be      *Backend
	q       *queueState
	l       *lane
	msg     *natsgo.Msg
	chunkID string
	ackWait time.Duration
	key     string // a keyed batch's ordering key (see ordering.go)
	seq     uint64 // a keyed message's stream sequence
	notRuns int    // a keyed message's deliveries that were not runs (its count exists if > 0)

	mu         sync.Mutex // serialises settles and extensions of one claim
	leaseUntil time.Time
	conn       uint64 // connEpoch when the message was pulled
	settled    bool
	lost       bool
	ackErr     error // why its +ACK was not sent, set by the flushGroup (see flushGroup.ack)
}

// Ack removes a successfully processed batch (and its chunks, if it had any). Its plain +ACK
// is published with the other Acks of the moment, and it returns once a PING/PONG round trip
// shared with them confirms that the server read it (see flushGroup), rather than a double
// ack per message.
func (be *Backend) Ack(ctx context.Context, c *core.Claim) error {
	return be.settle(ctx, "ack", c, func(ctx context.Context, h *handle) error {
		err := be.acks.ack(ctx, h)
		if errors.Is(err, core.ErrLeaseLost) {
			h.lost = true
		}
		return err
	})
}

// Drop removes a batch the engine has given up on: the message is terminated (+TERM, which the
// server reports in a JetStream advisory with reason) and its chunks are removed.
func (be *Backend) Drop(ctx context.Context, c *core.Claim, reason string) error {
	return be.settle(ctx, "drop", c, func(ctx context.Context, h *handle) error {
		return h.request(ctx, []byte("+TERM "+reason))
	})
}

// Retry rewrites the batch: body (the batch re-encoded by the engine with its attempt count; nil
// keeps the stored body) is stored as a new message, due after delay (a message schedule when
// delay > 0), and the old message is acknowledged. Deliveries therefore restarts at 1 on the
// next claim. The new message is stored before the old one is acknowledged, so a failure in
// between can cause a duplicate run, never a loss. A keyed batch (an Ordered queue) is retried
// in place instead, so it stays first of its key: a Nak that redelivers it after delay, the
// stored body kept, Deliveries counting on.
func (be *Backend) Retry(ctx context.Context, c *core.Claim, body []byte, delay time.Duration) error {
	if body == nil && c != nil {
		body = c.Body
	}
	return be.settle(ctx, "retry", c, func(ctx context.Context, h *handle) error {
		if h.key != "" {
			return h.request(ctx, nakBody(delay))
		}
		if err := be.store(ctx, h.q, c.ID, body, delay, "", false); err != nil {
			return err
		}
		return h.request(ctx, ackAck)
	})
}

// Extend resets the claim's lease on the server (+WPI, "work in progress") and sets
// c.LeaseUntil. JetStream leases are the consumer's AckWait: the new lease is AckWait from
// now, whatever lease is asked for. Extending a settled claim is a no-op.
func (be *Backend) Extend(ctx context.Context, c *core.Claim, lease time.Duration) error {
	return be.held(ctx, "extend", c, func(h *handle) error {
		sent := time.Now()
		if err := h.request(ctx, ackProgress); err != nil {
			return wrap(fmt.Sprintf("extend batch %s", c.ID), c.Queue, err)
		}
		h.leaseUntil = sent.Add(h.ackWait)
		c.LeaseUntil = h.leaseUntil
		return nil
	})
}

// held runs fn on c's handle, locked, when this Backend handed c out and still holds it: a
// no-op for a settled claim, core.ErrLeaseLost for a lost one.
func (be *Backend) held(ctx context.Context, op string, c *core.Claim, fn func(h *handle) error) error {
	h, err := be.handleOf(ctx, op, c)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.settled {
		return nil
	}
	if err := h.holdLocked(op, c); err != nil {
		return err
	}
	return fn(h)
}

// settle runs apply on a held claim: a no-op for a settled claim, core.ErrLeaseLost for a
// lost one. The claim counts as settled only when apply succeeds.
func (be *Backend) settle(ctx context.Context, op string, c *core.Claim, apply func(ctx context.Context, h *handle) error) error {
	return be.held(ctx, op, c, func(h *handle) error {
		be.settling(h.l)
		if err := apply(ctx, h); err != nil {
			return wrap(fmt.Sprintf("%s batch %s", op, c.ID), c.Queue, err)
		}
		h.settled = true
		if h.key != "" && op == "retry" {
			return nil // in place: the message, its chunks and its not-run count stay
		}
		if h.chunkID != "" {
			be.purgeChunks(h.q, h.chunkID)
		}
		if h.notRuns > 0 {
			be.purgeNotRuns(h.q, h.seq)
		}
		return nil
	})
}

// settling records, before a settle of a key partition's batch is sent, when it was sent
// (see lane.settledAt).
func (be *Backend) settling(l *lane) {
	if l == nil || l.part < 0 {
		return
	}
	be.mu.Lock()
	l.settledAt = time.Now()
	be.mu.Unlock()
}

// handleOf returns the claim's handle, checking that this Backend handed it out.
func (be *Backend) handleOf(ctx context.Context, op string, c *core.Claim) (*handle, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nats: %s: nil claim; pass a claim returned by Fetch", core.ErrInvalidConfig, op)
	}
	h, ok := c.Handle.(*handle)
	if !ok || h == nil || h.be != be {
		return nil, fmt.Errorf("%w: nats: %s batch %s of queue %q: the claim was not handed out by this backend; settle a claim with the backend that fetched it", core.ErrInvalidConfig, op, c.ID, c.Queue)
	}
	if err := be.usable(ctx, op, c.Queue); err != nil {
		return nil, err
	}
	return h, nil
}

// holdLocked returns core.ErrLeaseLost unless the lease has more than the margin left and
// the connection has not been re-established since the message was pulled. An ack's
// connection is checked when its +ACK is about to leave (see flushGroup.publishAck), once for
// its group, not here: connEpoch takes the connection's lock, which its flusher holds while
// it writes.
func (h *handle) holdLocked(op string, c *core.Claim) error {
	if !h.lost && op != "ack" && h.be.connEpoch() != h.conn {
		h.lost = true
		return fmt.Errorf("nats: %s batch %s of queue %q (delivery %d): the connection to the server was re-established since the batch was pulled, and a restarted server may already have handed it out again; do not settle it: %w",
			op, c.ID, c.Queue, c.Deliveries, core.ErrLeaseLost)
	}
	if !h.lost && time.Now().Add(h.be.leaseMargin(h.ackWait)).Before(h.leaseUntil) {
		return nil
	}
	h.lost = true
	return fmt.Errorf("nats: %s batch %s of queue %q (delivery %d): the lease ran out at %s and the batch may already run elsewhere; do not settle it again: %w",
		op, c.ID, c.Queue, c.Deliveries, h.leaseUntil.Format(time.RFC3339Nano), core.ErrLeaseLost)
}

// connEpoch is how many times the connection was re-established. JetStream accepts an
// acknowledgement (+WPI, +ACK) for a message it has since handed to another consumer, and a
// server restarted from its store may hand out again what it had delivered before: a claim
// pulled before a reconnect is therefore treated as lost (its Extend and settles return
// core.ErrLeaseLost, so core stops its listener), which keeps Exclusive and a single run per
// lease across server restarts and failovers, at the price of re-running what was in flight
// during a mere network blip.
func (be *Backend) connEpoch() uint64 { return be.nc.Stats().Reconnects }

// request sends an acknowledgement and waits for the server's reply.
func (h *handle) request(ctx context.Context, body []byte) error {
	cctx, cancel := h.be.callCtx(ctx)
	defer cancel()
	_, err := h.be.nc.RequestWithContext(cctx, h.msg.Reply, body)
	return err
}

// leaseMargin is Options.LeaseMargin or a tenth of the lease, at most 250ms.
func (be *Backend) leaseMargin(ackWait time.Duration) time.Duration {
	if be.opts.LeaseMargin > 0 {
		return be.opts.LeaseMargin
	}
	return min(ackWait/10, maxLeaseMargin)
}
