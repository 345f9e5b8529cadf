package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// LeaseMargin returns the fencing margin for a lease: max(lease/10, 1s), at most lease/4 (so a
// 100 ms lease keeps a positive 75 ms before its fence). A node treats a claim as lost once it
// has not confirmed an extension by LeaseUntil - LeaseMargin on its own clock; see the package
// doc ("Leases and self-fencing").
func LeaseMargin(lease time.Duration) time.Duration {
	return min(max(lease/10, time.Second), lease/4)
}

// leaseKey is the context key under which a listener's ctx carries its *running.
type leaseKey struct{}

// LeaseDeadline returns the time at which the node will fence the batch whose listener
// received ctx, that is the confirmed lease end minus LeaseMargin, and true; false if ctx is not
// a listener's context. The node extends the lease while the listener runs, so the value moves
// forward with every confirmed extension; once it passes without one, ctx is cancelled with
// cause ErrLeaseLost. Long work can compare its own estimate against it, and must stop when
// ctx is done. (The deadline is not ctx.Deadline: a context deadline cannot move forward, and
// would end with DeadlineExceeded instead of ErrLeaseLost.)
func LeaseDeadline(ctx context.Context) (time.Time, bool) {
	r, ok := ctx.Value(leaseKey{}).(*running)
	if !ok {
		return time.Time{}, false
	}
	r.fmu.Lock()
	defer r.fmu.Unlock()
	return r.fenceAt, true
}

// errFenced is returned by settle for a claim the node fenced itself: it was not settled.
var errFenced = fmt.Errorf("%w: not settled: the lease was not confirmed extended before its fence (LeaseUntil - LeaseMargin)", ErrLeaseLost)

// startFence arms r's fence timer at LeaseUntil - margin (the claim's lease as the adapter
// reported it, on this node's clock). A claim that arrives past its fence (it waited in an
// adapter's stash, or a slow fetch) but before LeaseUntil gets one extension, bounded by
// LeaseUntil, to confirm it; startFence reports false if that fails: the claim is not held.
func (n *Node) startFence(r *running) bool {
	c := r.claim
	fenceAt := c.LeaseUntil.Add(-n.margin)
	if !time.Now().Before(fenceAt) {
		if !time.Now().Before(c.LeaseUntil) {
			return false
		}
		ctx, cancel := context.WithDeadline(context.Background(), earliest(c.LeaseUntil, time.Now().Add(n.opts.ClaimTimeout)))
		defer cancel()
		start := time.Now()
		if err := safeCall("backend Extend", func() error { return n.backend.Extend(ctx, c, n.opts.Lease) }); err != nil {
			return false
		}
		fenceAt = earliest(c.LeaseUntil, start.Add(n.opts.Lease)).Add(-n.margin)
		if !time.Now().Before(fenceAt) {
			return false
		}
	}
	r.fmu.Lock()
	defer r.fmu.Unlock()
	r.fenceAt = fenceAt
	r.fence = time.AfterFunc(time.Until(fenceAt), func() { n.fenceFired(r) })
	return true
}

// stopFence disarms r's fence once its worker is done with the claim.
func (n *Node) stopFence(r *running) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	r.done = true
	if r.fence != nil {
		r.fence.Stop()
	}
}

// fenceFired runs when r's fence timer fires: unless a confirmed extension moved the fence
// meanwhile, the claim is lost and its listener cancelled with ErrLeaseLost.
func (n *Node) fenceFired(r *running) {
	r.fmu.Lock()
	if r.done || r.lost.Load() {
		r.fmu.Unlock()
		return
	}
	if d := time.Until(r.fenceAt); d > 0 {
		r.fence.Reset(d)
		r.fmu.Unlock()
		return
	}
	r.lost.Store(true)
	r.fmu.Unlock()
	n.stats.leaseLost.Add(1)
	n.log.Warn("txmq: lease not confirmed extended before its fence; cancelling the listener, the batch runs again elsewhere",
		"queue", r.claim.Queue, "batch", r.claim.ID, "fence", r.fenceAt, "margin", n.margin)
	r.cancel(ErrLeaseLost)
}

// holds reports whether r's claim is still held (not lost, its fence not passed) and its fence
// time. A fence found passed here fences the claim at once, as the timer would.
func (n *Node) holds(r *running) (time.Time, bool) {
	r.fmu.Lock()
	at := r.fenceAt
	ok := !r.lost.Load() && time.Now().Before(at)
	r.fmu.Unlock()
	if !ok {
		n.fenceFired(r)
	}
	return at, ok
}

// confirmLease moves r's fence after an extension confirmed the lease until until.
func (n *Node) confirmLease(r *running, until time.Time) {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if r.done || r.lost.Load() || !time.Now().Before(r.fenceAt) {
		return // too late: the fence has passed, the claim is lost whatever the backend says
	}
	r.fenceAt = until.Add(-n.margin)
	r.fence.Reset(time.Until(r.fenceAt))
}

// extendBelow is the share of the lease below which a claim's remaining lease is extended.
const extendBelow = 0.75

// dueForExtension reports whether r's claim has less than extendBelow of its lease left, as
// last confirmed (its fence plus the margin: the adapter's LeaseUntil may be later, as with a
// JetStream AckWait longer than this node's lease, but the fence is what counts here).
func (n *Node) dueForExtension(r *running) bool {
	r.fmu.Lock()
	confirmed := r.fenceAt.Add(n.margin)
	r.fmu.Unlock()
	return time.Until(confirmed) < time.Duration(float64(n.opts.Lease)*extendBelow)
}

// leaseLoop extends the leases of running batches. It ticks every tenth of the lease (first
// tick at once, then periodically) and extends every claim with less than three quarters of
// its lease left, so a claim is extended about every quarter to third of a lease, and an
// extension that fails is tried again at each tick until the claim's fence (half a lease
// later at least). Each extension runs on its own (one at a
// time per claim), bounded by the claim's fence, so a hung Extend delays neither the others nor
// the fence. A claim whose lease is lost, or not confirmed before its fence, has its listener's
// context cancelled with ErrLeaseLost.
func (n *Node) leaseLoop() {
	defer n.loops.Done()
	defer func() {
		n.mu.Lock()
		n.extendsDone = true // no extension starts after this: Wait below is not racing Add
		n.mu.Unlock()
		n.extending.Wait()
	}()
	period := n.opts.Lease / 10
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		n.extendDue()
		select {
		case <-n.stopCtx.Done():
			// Keep extending until the workers finish: Close waits for them.
			n.waitWorkersExtending(t)
			return
		case <-t.C:
		}
	}
}

// waitWorkersExtending keeps extending leases after stop until no batch runs or holds a slot
// (Close waiting for listeners) or the node halts.
func (n *Node) waitWorkersExtending(t *time.Ticker) {
	for !n.halted.Load() {
		n.mu.Lock()
		left := len(n.running) // batches between dispatch and registration hold a slot:
		for _, v := range n.inflight {
			left += v
		}
		n.mu.Unlock()
		if left == 0 {
			return // no worker can start an extension any more: extending.Wait is safe
		}
		select {
		case <-t.C:
			n.extendDue()
		case <-n.runCtx.Done():
			return
		}
	}
}

// extendConcurrency bounds parallel lease extensions.
const extendConcurrency = 16

// extendDue starts an extension for every running claim that has none in progress.
func (n *Node) extendDue() {
	if n.halted.Load() || n.frozen.Load() {
		return
	}
	n.mu.Lock()
	due := make([]*running, 0, len(n.running))
	for r := range n.running {
		due = append(due, r)
	}
	n.mu.Unlock()
	for _, r := range due {
		n.extendAsync(r)
	}
}

// extendAsync starts an extension of r unless one is in flight (bounded by the fence).
func (n *Node) extendAsync(r *running) {
	if !r.extending.CompareAndSwap(false, true) {
		return
	}
	n.mu.Lock()
	if n.extendsDone {
		n.mu.Unlock()
		r.extending.Store(false)
		return
	}
	n.extending.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.extending.Done()
		defer r.extending.Store(false)
		n.extendSem <- struct{}{}
		defer func() { <-n.extendSem }()
		n.extend(r)
	}()
}

func (n *Node) extend(r *running) {
	if !r.mu.TryLock() {
		return // a settle is in progress: the claim needs no more lease
	}
	defer r.mu.Unlock()
	if r.settled || r.lost.Load() || n.halted.Load() || n.frozen.Load() || !n.dueForExtension(r) {
		return
	}
	fenceAt, ok := n.holds(r)
	if !ok {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), earliest(fenceAt, time.Now().Add(n.opts.ClaimTimeout)))
	defer cancel()
	start := time.Now()
	err := safeCall("backend Extend", func() error { return n.backend.Extend(ctx, r.claim, n.opts.Lease) })
	switch {
	case err == nil:
		// The backend's lease began after start: start+Lease is never later than its end.
		n.confirmLease(r, earliest(r.claim.LeaseUntil, start.Add(n.opts.Lease)))
	case errors.Is(err, ErrLeaseLost):
		r.fmu.Lock()
		already := r.lost.Swap(true)
		r.fmu.Unlock()
		if already {
			return
		}
		n.stats.leaseLost.Add(1)
		n.log.Warn("txmq: lease lost while the batch ran; cancelling its listener", "queue", r.claim.Queue, "batch", r.claim.ID)
		r.cancel(ErrLeaseLost)
	default:
		n.log.Warn("txmq: lease extension failed; trying again until the claim's fence", "queue", r.claim.Queue, "batch", r.claim.ID,
			"fence", fenceAt, "error", err)
	}
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
