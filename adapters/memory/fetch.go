package memory

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
)

// minWait is the shortest timer a waiting Fetch arms, so a clock that does not move (a fake
// one in tests) cannot make it spin.
const minWait = time.Millisecond

// Fetch claims due batches for the queues in req (normalised: see core.FetchRequest.Normalize),
// at most each queue's Free and req.Max in all, picking among due batches at random. When
// nothing is due it blocks up to req.Wait (core.ClaimWait), waking at once when a publish,
// retry, settle or lease expiry on one of its queues may let it claim. Cancelling ctx ends the
// wait with an empty result and a nil error; claims already made are always returned. An
// Exclusive queue yields none while any node holds one of its batches, a queue with a
// cluster-wide limit none beyond it (limits.go).
func (be *Backend) Fetch(ctx context.Context, req core.FetchRequest) ([]*core.Claim, error) {
	req = req.Normalize()
	var w *waiter
	defer func() {
		if w != nil {
			be.unregister(w, req.Queues)
		}
	}()
	return core.ClaimWait(ctx, core.WaitOptions{
		Wait: req.Wait,
		Wake: func() <-chan struct{} { return w.ch },
		Done: be.done,
		Closed: func() error {
			be.mu.Lock()
			defer be.mu.Unlock()
			return be.usableLocked("fetch", "")
		},
		MinTimer: minWait,
	}, func() ([]*core.Claim, time.Duration, error) {
		be.mu.Lock()
		defer be.mu.Unlock()
		if err := be.usableLocked("fetch", ""); err != nil {
			return nil, -1, err
		}
		now := be.clock()
		claims, next := be.claimLocked(req, now)
		if len(claims) == 0 && req.Wait > 0 && w == nil {
			// Registered under the lock of the claim that found nothing: no wake-up is lost.
			w = &waiter{ch: make(chan struct{}, 1)}
			for _, qs := range req.Queues {
				q := be.queueLocked(qs.Queue)
				if q.waiters == nil {
					q.waiters = make(map[*waiter]struct{})
				}
				q.waiters[w] = struct{}{}
			}
		}
		if next.IsZero() {
			return claims, -1, nil
		}
		return claims, next.Sub(now), nil
	})
}

// claimLocked claims what req allows at now and returns the claims and the earliest time one
// of the requested queues may have more (zero when none pending). Queues are visited from a
// random start so the shared Max does not always favour the first one.
func (be *Backend) claimLocked(req core.FetchRequest, now time.Time) ([]*core.Claim, time.Time) {
	var next time.Time
	n := len(req.Queues)
	if n == 0 {
		return []*core.Claim{}, next
	}
	budget := req.Max
	// Room for what is ready now (expired leases found below may add more): at one message
	// per batch a fetch takes tens of claims, and growing the slice by appending was a copy
	// and an allocation per doubling.
	ready := 0
	for _, qs := range req.Queues {
		if q, ok := be.queues[qs.Queue]; ok {
			ready += min(qs.Free, q.readyLen())
		}
	}
	claims := make([]*core.Claim, 0, min(ready, budget))
	// The claims (with their leases) of one fetch share one array: at one message per batch a
	// fetch hands out tens of them, an allocation each under the backend's lock. The array
	// lives until the last of them is released (a claim and its lease are small).
	slab := make([]claimLease, cap(claims))
	leaseEnd := now.Add(req.Lease)
	start := be.rng.IntN(n)
	for i := range n {
		qs := req.Queues[(start+i)%n]
		q := be.queueLocked(qs.Queue)
		if q.advance(now) {
			q.notify() // expired leases may interest other blocked fetches too
		}
		want := min(qs.Free, budget)
		if qs.Exclusive && q.inflight.Len() > 0 {
			want = 0
		}
		if qs.Limit > 0 {
			want = min(want, qs.Limit-q.inflight.Len()) // see limits.go
		}
		var busy map[string]int // claims in flight per fairness key, with a KeyLimit
		if qs.KeyLimit > 0 && want > 0 {
			busy = q.keyBusy()
		}
		for ; want > 0 && q.readyLen() > 0; want-- {
			var r *record
			if busy != nil {
				if r = q.takeUnder(be.rng, busy, qs.KeyLimit); r == nil {
					break // every key with ready batches is at its limit
				}
				busy[r.fair]++
			} else {
				r = q.takeRandom(be.rng)
			}
			var cl *claimLease
			if len(slab) > 0 {
				cl, slab = &slab[0], slab[1:]
			} else {
				cl = new(claimLease) // an expired lease found above made one more ready
			}
			claims = append(claims, be.handOut(cl, r, req.Node, leaseEnd))
			budget--
		}
		if t := q.nextEvent(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return claims, next
}

// handOut moves a ready record in flight under a new lease and returns its claim, made in cl
// (zeroed memory of the caller's).
func (be *Backend) handOut(cl *claimLease, r *record, node string, leaseEnd time.Time) *core.Claim {
	r.deliveries++
	r.q.pushInFlight(r, leaseEnd)
	// The claim and its lease live and die together: one piece of memory for both (at one
	// message per batch there is a claim per message).
	cl.lease = lease{owner: be, rec: r, node: node}
	r.lease = &cl.lease
	cl.claim = core.Claim{
		Queue:      r.q.name,
		ID:         r.id,
		Body:       r.body, // read-only (core.Claim): no copy of a large body per delivery
		Deliveries: r.deliveries,
		LeaseUntil: leaseEnd,
		Handle:     &cl.lease,
	}
	return &cl.claim
}

// claimLease is a claim with its lease, allocated together by handOut.
type claimLease struct {
	claim core.Claim
	lease lease
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
