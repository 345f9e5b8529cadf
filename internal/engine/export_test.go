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
	n.mu.Lock()
	l := n.listeners[c.Queue]
	n.inflight[c.Queue]++
	n.workers.Add(1)
	n.mu.Unlock()
	n.work(l, c)
}

// DeliverAsync is Deliver on a goroutine of its own, the slot taken before it starts; the
// channel is closed when the policy is done with c.
func (n *Engine) DeliverAsync(c *core.Claim) chan struct{} {
	done := make(chan struct{})
	n.mu.Lock()
	l := n.listeners[c.Queue]
	n.inflight[c.Queue]++
	n.workers.Add(1)
	n.mu.Unlock()
	go func() { defer close(done); n.work(l, c) }()
	return done
}

// SetInflight sets the batches the queue holds slots for.
func (n *Engine) SetInflight(queue string, v int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.inflight[queue] = v
}

// Inflight returns the batches the queue holds slots for.
func (n *Engine) Inflight(queue string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.inflight[queue]
}

func (n *Engine) FetchRequest(now time.Time) core.FetchRequest { return n.fetchRequest(now) }
func (n *Engine) Fetch(req core.FetchRequest, now time.Time) ([]*core.Claim, error) {
	return n.fetch(req, now)
}
func (n *Engine) Release(queue string)         { n.release(queue) }
func (n *Engine) StepBack(queue string)        { n.stepBack(queue) }
func (n *Engine) Halted() bool                 { return n.halted.Load() }
func (n *Engine) Closing() bool                { return n.closing.Load() }
func (n *Engine) Buffered() int                { return n.buf.size() }
func (n *Engine) FlushAll(ctx context.Context) { n.flushAll(ctx) }
func (n *Engine) FlushDue(all bool)            { n.flushDue(all) }
func (n *Engine) Options() Options             { return n.opts }

// Spec returns the spec of the queue declared as name.
func (n *Engine) Spec(name string) *Spec { return n.specs.Lookup(name) }

// Store writes one batch as a flush would, reporting whether the backend took it.
func (n *Engine) Store(ctx context.Context, b core.OutgoingBatch) bool {
	return n.store(ctx, b, false) == storedBackend
}

// FlushPending flushes ps, Pendings of spec's queue made by Pending, as one buffer take.
func (n *Engine) FlushPending(ctx context.Context, spec *Spec, ps []*core.Pending) {
	n.flush(ctx, []*queueBuffer{{spec: spec, pending: ps}}, false)
}

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
func (n *Engine) BufferAdd(p *core.Pending, now time.Time) { n.buf.add(p, now) }

// BufferTake takes the due queue buffers (all of them with all).
func (n *Engine) BufferTake(now time.Time, all bool) Taken { return n.buf.take(now, all) }

// FlushTaken flushes what BufferTake returned.
func (n *Engine) FlushTaken(ctx context.Context, t Taken) { n.flush(ctx, t, true) }

// Flights returns how many ordered keys have a flight.
func (n *Engine) Flights() int {
	n.buf.mu.Lock()
	defer n.buf.mu.Unlock()
	return len(n.buf.flights.latest)
}

// Discard drops the buffer's content.
func (n *Engine) Discard() { n.buf.discard() }

// PoolStarted returns how many worker goroutines the pool started.
func (n *Engine) PoolStarted() int64 { return n.pool.started.Load() }
