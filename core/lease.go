package core

import (
	"errors"
	"sync"
	"time"
)

// leaseLoop extends the leases of running batches. It ticks every sixth of the lease (first
// tick at once, then periodically) and extends every claim with less than two thirds of its
// lease left, so a claim is extended about every third of a lease and always with at least half
// of it to spare: a pause of the process (GC, an overloaded machine) shorter than that costs no
// lease. A claim whose lease is lost has its listener's context cancelled with ErrLeaseLost.
func (n *Node) leaseLoop() {
	defer n.loops.Done()
	period := n.opts.Lease / 6
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

// waitWorkersExtending keeps extending leases after stop until no batch runs (Close waiting
// for listeners) or the node halts.
func (n *Node) waitWorkersExtending(t *time.Ticker) {
	for !n.halted.Load() {
		n.mu.Lock()
		left := len(n.running)
		n.mu.Unlock()
		if left == 0 {
			return
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

func (n *Node) extendDue() {
	if n.halted.Load() {
		return
	}
	n.mu.Lock()
	due := make([]*running, 0, len(n.running))
	for r := range n.running {
		due = append(due, r)
	}
	n.mu.Unlock()
	sem := make(chan struct{}, extendConcurrency)
	var wg sync.WaitGroup
	for _, r := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n.extend(r)
		}()
	}
	wg.Wait()
}

func (n *Node) extend(r *running) {
	if !r.mu.TryLock() {
		return // a settle is in progress: the claim needs no more lease
	}
	defer r.mu.Unlock()
	if r.settled || r.lost.Load() || n.halted.Load() || time.Until(r.claim.LeaseUntil) >= n.opts.Lease*2/3 {
		return
	}
	ctx, cancel := n.claimCtx()
	defer cancel()
	err := safeCall("backend Extend", func() error { return n.backend.Extend(ctx, r.claim, n.opts.Lease) })
	switch {
	case err == nil:
	case errors.Is(err, ErrLeaseLost):
		r.lost.Store(true)
		n.stats.leaseLost.Add(1)
		n.log.Warn("txmq: lease lost while the batch ran; cancelling its listener", "queue", r.claim.Queue, "batch", r.claim.ID)
		r.cancel(ErrLeaseLost)
	default:
		n.log.Warn("txmq: lease extension failed; will try again", "queue", r.claim.Queue, "batch", r.claim.ID, "error", err)
	}
}
