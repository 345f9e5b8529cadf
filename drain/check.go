package drain

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/txmq/txmq/core"
)

// OldStatus is the state of one old backend as this wrapper sees it.
type OldStatus struct {
	// Name is the old backend's label (Options.Names).
	Name string
	// Drained reports that the old backend was found empty: it is not polled, only
	// re-checked every RecheckInterval.
	Drained bool
	// DrainedAt is when it was last declared drained (zero if never).
	DrainedAt time.Time
	// Failing reports that the last call to it failed.
	Failing bool
	// LastCheck is when its depths were last checked (zero before the first check).
	LastCheck time.Time
	// Depth adds up its depths over the queues this wrapper was asked to fetch, as of the last
	// check that succeeded.
	Depth core.Depth
	// Settle is how long its checks must read empty before it counts as empty: 0 for exact
	// depths, else its core.DepthsSettle and at least the longest lease asked for.
	Settle time.Duration
}

// Status reports the state of every old backend, in the order given to New.
func (d *Backend) Status() []OldStatus {
	out := make([]OldStatus, 0, len(d.olds))
	for _, o := range d.olds {
		w := d.window(o)
		o.mu.Lock()
		out = append(out, OldStatus{
			Name: o.name, Drained: o.drained, DrainedAt: o.drainedAt, Failing: o.failing,
			LastCheck: o.lastCheck, Depth: o.lastDepth, Settle: w,
		})
		o.mu.Unlock()
	}
	return out
}

// DepthsSettle implements core.ApproximateDepths: the longest settle window of the primary
// and the old backends (0 when every one reports exact depths).
func (d *Backend) DepthsSettle() time.Duration {
	w := core.DepthsSettle(d.primary)
	for _, o := range d.olds {
		w = max(w, o.settle)
	}
	return w
}

// remember records the requested queues (the drain check covers every queue seen) and the
// lease.
func (d *Backend) remember(req core.FetchRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, q := range req.Queues {
		d.queues[q.Queue] = true
	}
	d.maxLease = max(d.maxLease, req.Lease)
}

func (d *Backend) queueNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.queues))
}

// window is how long o's checks must read empty before o counts as empty: 0 when its depths
// are exact; else its settle window, and at least the longest lease asked for (a batch in
// flight that the approximate counts missed has then finished or become visible again).
func (d *Backend) window(o *oldBackend) time.Duration {
	if o.settle <= 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(o.settle, d.maxLease)
}

// maybeCheck runs the depth check of o (on octx, the old backends' share of ctx) when it is
// due: every CheckInterval while o is polled, every RecheckInterval once it is drained, and at
// once when the set of queues grew (the first check runs at the first Fetch).
//
// A polled o is declared drained when at least two checks in a row, spanning its settle
// window, found every queue empty (nothing ready, in flight or delayed). A drained o found
// holding any batch is polled again.
func (d *Backend) maybeCheck(ctx, octx context.Context, o *oldBackend) {
	queues := d.queueNames()
	now := time.Now()
	o.mu.Lock()
	every := d.interval
	if o.drained {
		every = d.recheck
	}
	due := len(queues) > 0 && (now.Sub(o.lastCheck) >= every || len(queues) != o.checkedQueues)
	pubs := o.pubs
	if due {
		o.lastCheck = now
	}
	o.mu.Unlock()
	if !due {
		return
	}
	depths, err := o.b.Depths(octx, queues)
	if err != nil {
		d.noteOld(ctx, o, "checking the depths of", err)
	}
	window := d.window(o)
	o.mu.Lock()
	defer o.mu.Unlock()
	grew := len(queues) != o.checkedQueues
	o.checkedQueues = len(queues)
	if err == nil {
		o.lastDepth = total(depths)
	}
	// A batch published to o since the check began may be missing from its reading.
	empty := err == nil && allZero(depths) && o.pubs == pubs
	if o.drained {
		if err == nil && !empty {
			o.drained = false
			o.zeros, o.zeroSince = 0, time.Time{}
			clear(o.gates)
			d.log.Info("txmq drain: a drained old backend holds batches again (a node still on the old setting publishes there?); polling it again",
				"backend", o.name, "ready", o.lastDepth.Ready, "in_flight", o.lastDepth.InFlight, "delayed", o.lastDepth.Delayed)
		}
		return
	}
	switch {
	case !empty:
		o.zeros, o.zeroSince = 0, time.Time{}
	case grew || o.zeros == 0:
		o.zeros, o.zeroSince = 1, now
	default:
		o.zeros++
	}
	if o.zeros >= 2 && now.Sub(o.zeroSince) >= window {
		o.drained, o.drainedAt = true, now
		d.log.Info("txmq drain: old backend drained (found empty in every check for its settle window, twice at least); no longer polled, re-checked while it stays configured",
			"backend", o.name, "queues", len(queues), "settle", window, "recheck_every", d.recheck)
	}
}

// gateExclusive removes the exclusive queues that an old backend not drained may still hold
// batches of (ready, in flight or delayed; or it failed to answer, or is resting after a
// failure), so that the primary is not asked for them. The old backends are asked on octx,
// their share of ctx.
//
// An old backend clears a queue when its readings of the queue were empty for its settle
// window (one empty reading when its depths are exact). The clearance is re-read before each
// Fetch that asks the primary for the queue, until the primary has claimed a batch of it
// (a clearance younger than CheckInterval is trusted without a new reading); a batch of the
// queue claimed from the old backend again withdraws it.
func (d *Backend) gateExclusive(ctx, octx context.Context, left []core.QueueSlots) []core.QueueSlots {
	blocked := map[string]bool{}
	for _, o := range d.olds {
		var ask []string
		now := time.Now()
		o.mu.Lock()
		if !o.drained {
			for _, qs := range left {
				if !qs.Exclusive || blocked[qs.Queue] {
					continue
				}
				g := o.gate(qs.Queue)
				if g.confirmed || (!g.granted.IsZero() && now.Sub(g.granted) < d.interval) {
					continue
				}
				ask = append(ask, qs.Queue)
			}
		}
		o.mu.Unlock()
		if len(ask) == 0 || !o.acquire() {
			continue
		}
		window := d.window(o)
		var depths map[string]core.Depth
		err := errResting
		readAt := time.Now()
		if !o.resting(readAt) {
			depths, err = o.b.Depths(octx, ask)
			if err != nil {
				d.noteOld(ctx, o, "checking the depths of", err)
			}
		}
		o.mu.Lock()
		for _, q := range ask {
			g := o.gate(q)
			if err != nil || !isZero(depths[q]) {
				*g = exclusive{}
				blocked[q] = true
				continue
			}
			if g.zeroSince.IsZero() {
				g.zeroSince = readAt
			}
			if readAt.Sub(g.zeroSince) >= window {
				g.granted = readAt
				continue
			}
			blocked[q] = true
		}
		o.mu.Unlock()
	}
	if len(blocked) == 0 {
		return left
	}
	out := left[:0:0]
	for _, qs := range left {
		if !blocked[qs.Queue] {
			out = append(out, qs)
		}
	}
	return out
}

// revoke withdraws the clearance of exclusive queue q on o: o handed out a batch of it.
func (o *oldBackend) revoke(q string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	*o.gate(q) = exclusive{}
}

// confirm records that the primary claimed batches of exclusive queues: their clearances
// need no new reading until an old backend hands out a batch of the queue again.
func (d *Backend) confirm(asked []core.QueueSlots, cs []*core.Claim) {
	for _, c := range cs {
		if c == nil || !exclusiveIn(asked, c.Queue) {
			continue
		}
		for _, o := range d.olds {
			o.mu.Lock()
			if g := o.gates[c.Queue]; g != nil && !g.granted.IsZero() {
				g.confirmed = true
			}
			o.mu.Unlock()
		}
	}
}

// exclusiveIn reports whether queue is an exclusive queue of qs.
func exclusiveIn(qs []core.QueueSlots, queue string) bool {
	for _, q := range qs {
		if q.Queue == queue {
			return q.Exclusive
		}
	}
	return false
}

// total adds up the depths of every queue.
func total(m map[string]core.Depth) core.Depth {
	var t core.Depth
	for _, d := range m {
		t.Ready += d.Ready
		t.InFlight += d.InFlight
		t.Delayed += d.Delayed
	}
	return t
}
