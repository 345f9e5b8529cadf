package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

// leaseKey is the context key under which a listener's ctx carries its *running.
type leaseKey struct{}

// LeaseDeadline returns the fence of the batch whose listener received ctx (its confirmed
// lease end minus the margin) and true; false if ctx is not a listener's (txmq.LeaseDeadline).
func LeaseDeadline(ctx context.Context) (time.Time, bool) {
	r, ok := ctx.Value(leaseKey{}).(*running)
	if !ok {
		return time.Time{}, false
	}
	r.fs.mu.Lock()
	defer r.fs.mu.Unlock()
	return r.fenceAt, true
}

// MessageIDs returns the ids of the messages a listener received with ctx, nil when ctx is not
// a listener's (txmq.MessageIDs).
func MessageIDs(ctx context.Context) []string {
	r, ok := ctx.Value(leaseKey{}).(*running)
	if !ok || r.ids == nil {
		return nil
	}
	return r.ids.IDs()
}

// errFenced is returned by settle for a claim the node fenced itself: it was not settled.
var errFenced = fmt.Errorf("%w: not settled: the lease was not confirmed extended before its fence (LeaseUntil - LeaseMargin)", core.ErrLeaseLost)

// startFence registers r with the node's fences at LeaseUntil - margin (the claim's lease as
// the adapter reported it, on this node's clock). A claim that arrives past its fence (it waited in an
// adapter's stash, or a slow fetch) but before LeaseUntil gets one extension, bounded by
// LeaseUntil, to confirm it; startFence reports false if that fails: the claim is not held.
// It returns the time it registered r at (read once: a claim per batch).
func (n *Engine) startFence(r *running) (time.Time, bool) {
	c := r.claim
	fenceAt := c.LeaseUntil.Add(-n.margin)
	now := time.Now()
	if !now.Before(fenceAt) {
		if !now.Before(c.LeaseUntil) {
			return now, false
		}
		ctx, cancel := context.WithDeadline(context.Background(), earliest(c.LeaseUntil, time.Now().Add(n.opts.ClaimTimeout)))
		defer cancel()
		start := time.Now()
		if err := safeCall("backend Extend", func() error { return n.backend.Extend(ctx, c, n.opts.Lease) }); err != nil {
			return now, false
		}
		fenceAt = earliest(c.LeaseUntil, start.Add(n.opts.Lease)).Add(-n.margin)
		if now = time.Now(); !now.Before(fenceAt) {
			return now, false
		}
	}
	s := &n.fences
	s.mu.Lock()
	defer s.mu.Unlock()
	r.fenceAt = fenceAt
	s.addLocked(r)
	return now, true
}

// stopFence disarms r's fence once its worker is done with the claim.
func (n *Engine) stopFence(r *running) {
	s := &n.fences
	s.mu.Lock()
	defer s.mu.Unlock()
	r.done = true
	s.removeLocked(r)
}

// fenceExpired runs when the node's fence timer fires: every claim whose fence passed without
// a confirmed extension moving it is lost, and its listener cancelled with ErrLeaseLost.
func (n *Engine) fenceExpired() {
	n.fences.mu.Lock()
	lost := n.fences.expireLocked(time.Now())
	n.fences.mu.Unlock()
	for _, r := range lost {
		n.fenced(r)
	}
}

// fenced reports and cancels r, whose fence passed (r.lost is already set).
func (n *Engine) fenced(r *running) {
	n.stats.leaseLost.Add(1)
	n.stepBack(r.claim.Queue)
	n.log.Warn("txmq: lease not confirmed extended before its fence; cancelling the listener, the batch runs again elsewhere",
		"queue", r.claim.Queue, "batch", r.claim.ID, "fence", r.fenceAt, "margin", n.margin)
	r.cancel(core.ErrLeaseLost)
}

// holds reports whether r's claim is still held (not lost, its fence not passed) and its fence
// time. A fence found passed here fences the claim at once, as the timer would.
func (n *Engine) holds(r *running) (time.Time, bool) { return n.holdsAt(r, time.Now()) }

// holdsAt is holds with the time now.
func (n *Engine) holdsAt(r *running, now time.Time) (time.Time, bool) {
	s := &n.fences
	s.mu.Lock()
	at := r.fenceAt
	ok := !r.lost.Load() && now.Before(at)
	fire := !ok && !r.lost.Load() && !r.done
	if fire {
		r.lost.Store(true)
		s.dropLocked(r)
	}
	s.mu.Unlock()
	if fire {
		n.fenced(r)
	}
	return at, ok
}

// confirmLease moves r's fence after an extension confirmed the lease until until.
func (n *Engine) confirmLease(r *running, until time.Time) {
	s := &n.fences
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done || r.lost.Load() || !time.Now().Before(r.fenceAt) {
		return // too late: the fence has passed, the claim is lost whatever the backend says
	}
	r.fenceAt = until.Add(-n.margin)
	s.movedLocked(r)
}

// extendBelow is the share of the lease below which a claim's remaining lease is extended.
const extendBelow = 0.75

// dueForExtension reports whether r's claim has less than extendBelow of its lease left, as
// last confirmed (its fence plus the margin: the adapter's LeaseUntil may be later, as with a
// JetStream AckWait longer than this node's lease, but the fence is what counts here).
func (n *Engine) dueForExtension(r *running) bool { return n.dueForExtensionAt(r, time.Now()) }

// dueForExtensionAt is dueForExtension at now.
func (n *Engine) dueForExtensionAt(r *running, now time.Time) bool {
	n.fences.mu.Lock()
	confirmed := r.fenceAt.Add(n.margin)
	n.fences.mu.Unlock()
	return confirmed.Sub(now) < time.Duration(float64(n.opts.Lease)*extendBelow)
}

// leaseLoop extends the leases of running batches. It ticks every tenth of the lease (first
// tick at once, then periodically) and extends every claim with less than three quarters of
// its lease left, so a claim is extended about every quarter to third of a lease, and an
// extension that fails is tried again at each tick until the claim's fence (half a lease
// later at least). Each extension runs on its own (one at a
// time per claim), bounded by the claim's fence, so a hung Extend delays neither the others nor
// the fence. A claim whose lease is lost, or not confirmed before its fence, has its listener's
// context cancelled with ErrLeaseLost.
func (n *Engine) leaseLoop() {
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
func (n *Engine) waitWorkersExtending(t *time.Ticker) {
	for !n.halted.Load() {
		// Batches between dispatch and registration hold a slot. The slots are read first:
		// after the stop nothing is dispatched, so a batch that registers after this read was
		// counted in it.
		n.mu.Lock()
		left := 0
		for _, v := range n.inflight {
			left += v
		}
		n.mu.Unlock()
		left += n.fences.count()
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
func (n *Engine) extendDue() {
	if n.halted.Load() || n.frozen.Load() {
		return
	}
	for _, r := range n.fences.snapshot() {
		n.extendAsync(r)
	}
}

// extendAsync starts an extension of r unless one is in flight (bounded by the fence).
func (n *Engine) extendAsync(r *running) {
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

func (n *Engine) extend(r *running) {
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
		n.recordExtended(r)
	case errors.Is(err, core.ErrLeaseLost):
		n.fences.mu.Lock()
		already := r.lost.Swap(true)
		n.fences.dropLocked(r)
		n.fences.mu.Unlock()
		if already {
			return
		}
		n.stats.leaseLost.Add(1)
		n.stepBack(r.claim.Queue)
		n.log.Warn("txmq: lease lost while the batch ran; cancelling its listener", "queue", r.claim.Queue, "batch", r.claim.ID)
		r.cancel(core.ErrLeaseLost)
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

// stepBack keeps queue out of this node's fetches for one lease after the node lost a lease
// of it. A node that cannot keep its leases (its Extend calls fail or hang, it was paused)
// would otherwise claim the batch again as soon as the backend releases it, lose it again,
// and keep a healthy node from ever getting it: on an Exclusive queue that stalls the whole
// queue. One lease costs nothing when this node is alone: the lost batch is not claimable
// before its lease ends anyway.
func (n *Engine) stepBack(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.steppedBack[queue] = time.Now().Add(n.opts.Lease)
}
