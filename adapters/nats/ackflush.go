package nats

import (
	"context"
	"fmt"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/txmq/txmq/core"
)

// flushGroup publishes and confirms plain (not double) acknowledgements in groups. An Ack
// joins the group of the moment; one goroutine publishes the group's +ACKs one after the
// other and then makes a PING/PONG round trip, so that when Ack returns nil the server has
// read the acknowledgement (a server answers a PING only after everything the connection
// sent before it). Every Ack of a group shares one round trip, where a double ack costs the
// server a reply per message and the client a request per message: at one message per batch
// that was a third of what a node could drain. Publishing the group together, rather than
// each Ack from its own goroutine, lets the connection write it in a few writes, rather than
// one write per +ACK, and keeps the Acks off the connection's lock (at one message per batch
// the writes were about a tenth of a node's CPU).
//
// An Ack waits for the round trip in flight, if any, before its +ACK leaves, so its claim's
// lease is checked again right before it is published (see publishAck): one that ran out
// meanwhile is refused with core.ErrLeaseLost, never sent. What the PONG does not say is
// that the server applied the ack; one it could not apply (the message was redelivered
// meanwhile, which the lease margin makes unlikely) leaves the message to its AckWait: it
// runs again, as at-least-once allows.
type flushGroup struct {
	nc      *natsgo.Conn
	timeout time.Duration

	mu      sync.Mutex
	next    *flushWait // the group that Acks join now; nil until one joins
	acks    []*handle  // the +ACKs of next, to publish before its round trip
	spare   []*handle  // a slice for acks, reused
	running bool       // a goroutine runs groups
}

// flushWait is one round trip and those waiting for it.
type flushWait struct {
	done chan struct{}
	err  error
}

// ack publishes h's +ACK with the group of the moment and returns once the group's round
// trip has come back (nil), or with why h's +ACK was not sent or the round trip failed (each
// is bounded by Options.Timeout). ctx only ends the wait when it is already done at the
// call: once queued, the +ACK leaves whatever ctx says (and the wait does not arm ctx's
// timer: at one message per batch those timers were a tenth of an Ack). h is locked by the
// caller (see Backend.settle).
func (g *flushGroup) ack(ctx context.Context, h *handle) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.ackErr = nil
	w := g.join(h)
	<-w.done
	if h.ackErr != nil {
		return h.ackErr
	}
	return w.err
}

// flush returns once a round trip that started after the call has come back (nil) or
// failed: every Ack queued before it has been published by then.
func (g *flushGroup) flush() error {
	w := g.join(nil)
	<-w.done
	return w.err
}

// join adds h (nil: none) to the group of the moment and returns it, starting the goroutine
// that runs groups if none runs.
func (g *flushGroup) join(h *handle) *flushWait {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.next
	if w == nil {
		w = &flushWait{done: make(chan struct{})}
		g.next = w
	}
	if h != nil {
		g.acks = append(g.acks, h)
	}
	if !g.running {
		g.running = true
		go g.run()
	}
	return w
}

// run publishes groups and makes their round trips while Acks join them.
func (g *flushGroup) run() {
	for {
		g.mu.Lock()
		w, acks := g.next, g.acks
		if w == nil {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.next, g.acks, g.spare = nil, g.spare, nil
		g.mu.Unlock()
		if len(acks) > 0 {
			epoch := acks[0].be.connEpoch() // once per group: it takes the connection's lock
			for _, h := range acks {
				h.ackErr = g.publishAck(h, epoch)
			}
		}
		w.err = g.nc.FlushTimeout(g.timeout)
		close(w.done)
		clear(acks)
		g.mu.Lock()
		g.spare = acks[:0]
		g.mu.Unlock()
	}
}

// publishAck publishes h's +ACK unless its lease has run out (or is within the margin of
// it) or the connection was re-established since h was pulled (epoch is the connection's
// now, see connEpoch), while it waited for its group: the checks of handle.holdLocked,
// made again right before the +ACK leaves.
func (g *flushGroup) publishAck(h *handle, epoch uint64) error {
	if !time.Now().Add(h.be.leaseMargin(h.ackWait)).Before(h.leaseUntil) {
		return fmt.Errorf("nats: ack: the lease ran out at %s while the acknowledgement waited to be sent: %w",
			h.leaseUntil.Format(time.RFC3339Nano), core.ErrLeaseLost)
	}
	if epoch != h.conn {
		return fmt.Errorf("nats: ack: the connection to the server was re-established while the acknowledgement waited to be sent: %w",
			core.ErrLeaseLost)
	}
	return g.nc.Publish(h.msg.Reply, ackAck)
}
