package engine

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/testhooks"
)

// This file opens the engine's internals to its external tests (package engine_test), which
// build queues and listeners through the app API (package txmq) and then reach in here.

// The engine's constants the tests check against.
const (
	EarlyAllowance   = earlyAllowance
	SettleAttempts   = settleAttempts
	FlushConcurrency = flushConcurrency
	MaxIdleWorkers   = maxIdleWorkers
)

// Of returns the engine of node, a *txmq.Node.
func Of(node any) *Engine { return testhooks.Engine(node).(*Engine) }

// Deliver runs claim c as the driver would, on the calling goroutine: it takes the queue's
// slot and runs the policy (decode, run, settle).
func (n *Engine) Deliver(c *core.Claim) {
	n.drv.mu.Lock()
	l := n.drv.listeners[c.Queue]
	n.drv.inflight[c.Queue]++
	n.run.admit()
	n.drv.mu.Unlock()
	n.run.work(l, c)
}

// DeliverAsync is Deliver on a goroutine of its own, the slot taken before it starts; the
// channel is closed when the policy is done with c.
func (n *Engine) DeliverAsync(c *core.Claim) chan struct{} {
	done := make(chan struct{})
	n.drv.mu.Lock()
	l := n.drv.listeners[c.Queue]
	n.drv.inflight[c.Queue]++
	n.run.admit()
	n.drv.mu.Unlock()
	go func() { defer close(done); n.run.work(l, c) }()
	return done
}

// SetInflight sets the batches the queue holds slots for.
func (n *Engine) SetInflight(queue string, v int) {
	n.drv.mu.Lock()
	defer n.drv.mu.Unlock()
	n.drv.inflight[queue] = v
}

// Inflight returns the batches the queue holds slots for.
func (n *Engine) Inflight(queue string) int {
	n.drv.mu.Lock()
	defer n.drv.mu.Unlock()
	return n.drv.inflight[queue]
}

// The driver's and the publisher's steps, one call each, for tests that drive them by hand.

// FetchRequest is the driver's request at now.
func (n *Engine) FetchRequest(now time.Time) core.FetchRequest { return n.drv.fetchRequest(now) }

// Fetch runs one fetch of req.
func (n *Engine) Fetch(req core.FetchRequest, now time.Time) ([]*core.Claim, error) {
	return n.drv.fetch(req, now)
}

// Release frees a slot of queue.
func (n *Engine) Release(queue string) { n.drv.release(queue) }

// StepBack keeps queue out of fetches for a lease.
func (n *Engine) StepBack(queue string) { n.drv.stepBack(queue) }

// Closing reports whether Close began.
func (n *Engine) Closing() bool { return n.closing.Load() }

// Buffered returns the messages in the publish buffer.
func (n *Engine) Buffered() int { return n.pub.buf.size() }

// FlushAll flushes the whole buffer within ctx.
func (n *Engine) FlushAll(ctx context.Context) { n.pub.flushAll(ctx) }

// FlushDue flushes the due buffers (all of them with all).
func (n *Engine) FlushDue(all bool) { n.pub.flushDue(all) }

// Options returns the engine's options, defaults applied.
func (n *Engine) Options() Options { return n.opts }

// Spec returns the spec of the queue declared as name.
func (n *Engine) Spec(name string) *Spec { return n.specs.Lookup(name) }

// Store writes one batch as a flush would, reporting whether the backend took it.
func (n *Engine) Store(ctx context.Context, b core.OutgoingBatch) bool {
	return n.pub.store(ctx, b, false, nil) == storedBackend
}

// FlushPending flushes ps, Pendings of spec's queue made by Pending, as one buffer take.
func (n *Engine) FlushPending(ctx context.Context, spec *Spec, ps []*core.Pending) {
	msgs := 0
	for _, p := range ps {
		msgs += len(p.Messages)
	}
	n.pub.flush(ctx, []*queueBuffer{{spec: spec, pending: ps, messages: msgs}}, false)
}

// FlushPartBatches is about how many batches one part of a flush holds.
const FlushPartBatches = flushPartBatches

// PendingOpts are the engine's data of a test's Pending.
type PendingOpts struct {
	Clock                  Clock
	CallerIDs, OnePerBatch bool
}

// Pending sets p.Batcher as the engine's Publish would for spec, and returns p.
func Pending(spec *Spec, p *core.Pending, o PendingOpts) *core.Pending {
	p.Batcher = &pendingMeta{spec: spec, clock: o.Clock, callerIDs: o.CallerIDs, onePerBatch: o.OnePerBatch}
	return p
}

// Batches is the engine's batches of ps.
func Batches(ps []*core.Pending, now time.Time, dedup bool) ([]core.OutgoingBatch, error) {
	return batches(ps, now, dedup)
}

// OrderLanes is the engine's orderLanes.
func OrderLanes(bs []core.OutgoingBatch) [][]int { return orderLanes(bs) }

// Taken is what a take from the buffer returned, for FlushTaken.
type Taken []*queueBuffer

// BufferAdd adds p to the publish buffer at now.
func (n *Engine) BufferAdd(p *core.Pending, now time.Time) { n.pub.buf.add(p, now) }

// BufferTake takes the due queue buffers (all of them with all).
func (n *Engine) BufferTake(now time.Time, all bool) Taken { return n.pub.buf.take(now, all) }

// FlushTaken flushes what BufferTake returned.
func (n *Engine) FlushTaken(ctx context.Context, t Taken) { n.pub.flush(ctx, t, true) }

// Flights returns how many ordered keys have a flight.
func (n *Engine) Flights() int {
	n.pub.buf.mu.Lock()
	defer n.pub.buf.mu.Unlock()
	return len(n.pub.buf.flights.latest)
}

// Discard drops the buffer's content.
func (n *Engine) Discard() { n.pub.buf.discard() }

// PoolStarted returns how many worker goroutines the pool started.
func (n *Engine) PoolStarted() int64 { return n.run.pool.started.Load() }

// SetCloseLogEvery sets how often Close repeats what it waits for; call it before Close.
func (n *Engine) SetCloseLogEvery(d time.Duration) { n.opts.CloseLogEvery = d }
