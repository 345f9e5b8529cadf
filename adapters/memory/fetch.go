package memory

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
)

// minWait is the shortest timer a waiting Fetch arms, so a clock that does not move (a fake
// one in tests) cannot make it spin.
const minWait = time.Millisecond

// Fetch claims due batches for the queues in req, at most each queue's Free, picking among due
// batches at random. When nothing is due it blocks up to req.Wait, waking at once when a
// publish, retry, settle or lease expiry on one of its queues may let it claim. Cancelling ctx
// ends the wait with an empty result and a nil error; claims already made are always returned.
//
// Unlimited queues share one budget per call: req.Max when positive, Options.FetchLimit
// otherwise. An Exclusive queue yields at most one claim, and none while any node holds one.
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	lease := req.Lease
	if lease <= 0 {
		lease = be.defaultLease
	}
	var (
		deadline time.Time
		w        *waiter
		timer    *time.Timer
	)
	if req.Wait > 0 {
		deadline = time.Now().Add(req.Wait)
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if w != nil {
			be.unregister(w, req.Queues)
		}
	}()
	for {
		be.mu.Lock()
		if err := be.usableLocked("fetch", ""); err != nil {
			be.mu.Unlock()
			return nil, err
		}
		if ctx.Err() != nil {
			be.mu.Unlock()
			return []*core.Claim{}, nil
		}
		now := be.clock()
		claims, next := be.claimLocked(req, lease, now)
		if len(claims) > 0 || req.Wait <= 0 || len(req.Queues) == 0 {
			be.mu.Unlock()
			return claims, nil
		}
		sleep := time.Until(deadline)
		if sleep <= 0 {
			be.mu.Unlock()
			return claims, nil
		}
		if w == nil {
			w = &waiter{ch: make(chan struct{}, 1)}
			for _, qs := range req.Queues {
				q := be.queueLocked(qs.Queue)
				if q.waiters == nil {
					q.waiters = make(map[*waiter]struct{})
				}
				q.waiters[w] = struct{}{}
			}
		}
		be.mu.Unlock()

		if !next.IsZero() {
			sleep = min(sleep, max(next.Sub(now), minWait))
		}
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-w.ch:
		case <-timer.C:
		case <-ctx.Done():
		case <-be.done:
		}
	}
}

// claimLocked claims what req allows at now and returns the claims and the earliest time one
// of the requested queues may have more (zero when none pending). Queues are visited from a
// random start so a shared budget does not always favour the first one.
func (be *Backend) claimLocked(req core.FetchRequest, lease time.Duration, now time.Time) ([]*core.Claim, time.Time) {
	claims := []*core.Claim{}
	var next time.Time
	n := len(req.Queues)
	if n == 0 {
		return claims, next
	}
	budget := req.Max
	if budget <= 0 {
		budget = be.fetchLimit
	}
	leaseEnd := now.Add(lease)
	start := be.rng.IntN(n)
	for i := range n {
		qs := req.Queues[(start+i)%n]
		q := be.queueLocked(qs.Queue)
		if q.advance(now) {
			q.notify() // expired leases may interest other blocked fetches too
		}
		want := qs.Free
		unlimited := want < 0
		if unlimited {
			want = budget
		}
		if qs.Exclusive {
			if q.inflight.Len() > 0 {
				want = 0
			} else {
				want = min(want, 1)
			}
		}
		for ; want > 0 && len(q.ready) > 0; want-- {
			r := q.takeRandom(be.rng)
			claims = append(claims, be.handOut(r, req.Node, leaseEnd))
			if unlimited {
				budget--
			}
		}
		if t := q.nextEvent(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return claims, next
}

// handOut moves a ready record in flight under a new lease and returns its claim.
func (be *Backend) handOut(r *record, node string, leaseEnd time.Time) *core.Claim {
	r.deliveries++
	r.q.pushInFlight(r, leaseEnd)
	l := &lease{owner: be, rec: r, node: node}
	r.lease = l
	return &core.Claim{
		Queue:      r.q.name,
		ID:         r.id,
		Body:       r.body, // read-only (core.Claim): no copy of a large body per delivery
		Deliveries: r.deliveries,
		LeaseUntil: leaseEnd,
		Handle:     l,
	}
}

// unregister removes a waiting fetch from its queues.
func (be *Backend) unregister(w *waiter, queues []core.QueueSlots) {
	be.mu.Lock()
	defer be.mu.Unlock()
	for _, qs := range queues {
		if q, ok := be.queues[qs.Queue]; ok {
			delete(q.waiters, w)
		}
	}
}
