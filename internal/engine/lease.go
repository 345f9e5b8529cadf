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
// It returns the time it registered r at (read once: a claim per batch), and whether the
// claim is already due for an extension at that time (dueForExtensionAt, judged under the
// same lock: one lock round trip per claim less).
func (rn *runner) startFence(r *running) (now time.Time, held, extend bool) {
	n := rn.e
	c := r.claim
	fenceAt := c.LeaseUntil.Add(-rn.margin)
	now = time.Now()
	if !now.Before(fenceAt) {
		if !now.Before(c.LeaseUntil) {
			return now, false, false
		}
		ctx, cancel := context.WithDeadline(context.Background(), earliest(c.LeaseUntil, time.Now().Add(n.opts.ClaimTimeout)))
		defer cancel()
		start := time.Now()
		if err := safeCall("backend Extend", func() error { return n.backend.Extend(ctx, c, n.opts.Lease) }); err != nil {
			return now, false, false
		}
		fenceAt = earliest(c.LeaseUntil, start.Add(n.opts.Lease)).Add(-rn.margin)
		if now = time.Now(); !now.Before(fenceAt) {
			return now, false, false
		}
	}
	s := &rn.fences
	s.mu.Lock()
	defer s.mu.Unlock()
	r.fenceAt = fenceAt
	s.addLocked(r)
	return now, true, rn.dueAtLocked(r, now)
}

// stopFence disarms r's fence once its worker is done with the claim.
func (rn *runner) stopFence(r *running) {
	s := &rn.fences
	s.mu.Lock()
	defer s.mu.Unlock()
	r.done = true
	s.removeLocked(r)
}

// fenceExpired runs when the node's fence timer fires: every claim whose fence passed without
// a confirmed extension moving it is lost, and its listener cancelled with ErrLeaseLost.
func (rn *runner) fenceExpired() {
	rn.fences.mu.Lock()
	lost := rn.fences.expireLocked(time.Now())
	rn.fences.mu.Unlock()
	for _, r := range lost {
		rn.fenced(r)
	}
}

// fenced reports and cancels r, whose fence passed (r.lost is already set).
func (rn *runner) fenced(r *running) {
	n := rn.e
	n.stats.leaseLost.Add(1)
	n.drv.stepBack(r.claim.Queue)
	n.log.Warn("txmq: lease not confirmed extended before its fence; cancelling the listener, the batch runs again elsewhere",
		"queue", r.claim.Queue, "batch", r.claim.ID, "fence", r.fenceAt, "margin", rn.margin)
	r.cancel(core.ErrLeaseLost)
}

// holds reports whether r's claim is still held (not lost, its fence not passed) and its fence
// time. A fence found passed here fences the claim at once, as the timer would.
func (rn *runner) holds(r *running) (time.Time, bool) { return rn.holdsAt(r, time.Now()) }

// holdsAt is holds with the time now.
func (rn *runner) holdsAt(r *running, now time.Time) (time.Time, bool) {
	s := &rn.fences
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
		rn.fenced(r)
	}
	return at, ok
}

// confirmLease moves r's fence after an extension confirmed the lease until until.
func (rn *runner) confirmLease(r *running, until time.Time) {
	s := &rn.fences
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done || r.lost.Load() || !time.Now().Before(r.fenceAt) {
		return // too late: the fence has passed, the claim is lost whatever the backend says
	}
	r.fenceAt = until.Add(-rn.margin)
	s.movedLocked(r)
}

// extendBelow is the share of the lease below which a claim's remaining lease is extended.
const extendBelow = 0.75

// dueForExtension reports whether r's claim has less than extendBelow of its lease left, as
// last confirmed (its fence plus the margin: the adapter's LeaseUntil may be later, as with a
// JetStream AckWait longer than this node's lease, but the fence is what counts here).
func (rn *runner) dueForExtension(r *running) bool { return rn.dueForExtensionAt(r, time.Now()) }

// dueForExtensionAt is dueForExtension at now.
func (rn *runner) dueForExtensionAt(r *running, now time.Time) bool {
	rn.fences.mu.Lock()
	defer rn.fences.mu.Unlock()
	return rn.dueAtLocked(r, now)
}

// dueAtLocked is dueForExtensionAt with rn.fences.mu held.
func (rn *runner) dueAtLocked(r *running, now time.Time) bool {
	confirmed := r.fenceAt.Add(rn.margin)
	return confirmed.Sub(now) < time.Duration(float64(rn.e.opts.Lease)*extendBelow)
}

// leaseLoop extends the leases of running batches. It ticks every tenth of the lease (first
// tick at once, then periodically) and extends every claim with less than three quarters of
// its lease left, so a claim is extended about every quarter to third of a lease, and an
// extension that fails is tried again at each tick until the claim's fence (half a lease
// later at least). Each extension runs on its own (one at a
// time per claim), bounded by the claim's fence, so a hung Extend delays neither the others nor
// the fence. A claim whose lease is lost, or not confirmed before its fence, has its listener's
// context cancelled with ErrLeaseLost.
func (rn *runner) leaseLoop() {
	n := rn.e
	defer n.loops.Done()
	defer func() {
		rn.mu.Lock()
		rn.extendsDone = true // no extension starts after this: Wait below is not racing Add
		rn.mu.Unlock()
		rn.extending.Wait()
	}()
	period := n.opts.Lease / 10
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		rn.extendDue()
		select {
		case <-n.stopCtx.Done():
			// Keep extending until the workers finish: Close waits for them.
			rn.waitWorkersExtending(t)
			return
		case <-t.C:
		}
	}
}

// waitWorkersExtending keeps extending leases after stop until no batch runs or holds a slot
// (Close waiting for listeners) or the node halts.
func (rn *runner) waitWorkersExtending(t *time.Ticker) {
	n := rn.e
	for !n.halted.Load() {
		// Batches between dispatch and registration hold a slot. The slots are read first:
		// after the stop nothing is dispatched, so a batch that registers after this read was
		// counted in it.
		left := n.drv.busy() + rn.fences.count()
		if left == 0 {
			return // no worker can start an extension any more: extending.Wait is safe
		}
		select {
		case <-t.C:
			rn.extendDue()
		case <-rn.runCtx.Done():
			return
		}
	}
}

// extendConcurrency bounds parallel lease extensions.
const extendConcurrency = 16

// extendDue starts an extension for every running claim that has none in progress.
func (rn *runner) extendDue() {
	n := rn.e
	if n.halted.Load() || n.frozen.Load() {
		return
	}
	for _, r := range rn.fences.snapshot() {
		rn.extendAsync(r)
	}
}

// extendAsync starts an extension of r unless one is in flight (bounded by the fence).
func (rn *runner) extendAsync(r *running) {
	if !r.extending.CompareAndSwap(false, true) {
		return
	}
	rn.mu.Lock()
	if rn.extendsDone {
		rn.mu.Unlock()
		r.extending.Store(false)
		return
	}
	rn.extending.Add(1)
	rn.mu.Unlock()
	go func() {
		defer rn.extending.Done()
		defer r.extending.Store(false)
		rn.extendSem <- struct{}{}
		defer func() { <-rn.extendSem }()
		rn.extend(r)
	}()
}

func (rn *runner) extend(r *running) {
	n := rn.e
	if !r.mu.TryLock() {
		return // a settle is in progress: the claim needs no more lease
	}
	defer r.mu.Unlock()
	if r.settled || r.lost.Load() || n.halted.Load() || n.frozen.Load() || !rn.dueForExtension(r) {
		return
	}
	fenceAt, ok := rn.holds(r)
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
		rn.confirmLease(r, earliest(r.claim.LeaseUntil, start.Add(n.opts.Lease)))
		rn.recordExtended(r)
	case errors.Is(err, core.ErrLeaseLost):
		rn.fences.mu.Lock()
		already := r.lost.Swap(true)
		rn.fences.dropLocked(r)
		rn.fences.mu.Unlock()
		if already {
			return
		}
		n.stats.leaseLost.Add(1)
		n.drv.stepBack(r.claim.Queue)
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
func (dr *driver) stepBack(queue string) {
	n := dr.e
	dr.mu.Lock()
	defer dr.mu.Unlock()
	dr.steppedBack[queue] = time.Now().Add(n.opts.Lease)
}
