package memory

import (
	"math/rand/v2"

	"github.com/txmq/txmq/core"
)

// Cluster-wide limits (core.ClusterLimiter): every node of a memory backend shares its one
// store under one mutex, so a claim counts what is in flight as it claims. A queue's Limit
// caps the claim at Limit minus the queue's records in flight (the in-flight heap, from which
// settles and expired leases have already taken theirs: the claim first applies the passage
// of time). A KeyLimit counts the records in flight per fairness key (record.fair; "" for a
// batch without one) and passes over the keys at their limit: on a fair queue the first lane
// in turn whose key has room is served and the lanes passed over keep their places, so a key
// whose slot comes back is served first; on a queue that holds only keyless batches the one
// key "" is at its limit or not. Settles and lease ends wake waiting fetches as they always
// do, so a freed slot is claimed at once.

var _ core.ClusterLimiter = (*Backend)(nil)

// LimitsClaims implements core.ClusterLimiter: the memory backend enforces QueueSlots.Limit
// and KeyLimit.
func (be *Backend) LimitsClaims() error { return nil }

// keyBusy counts the queue's records in flight per fairness key.
func (q *queue) keyBusy() map[string]int {
	busy := make(map[string]int)
	for _, r := range q.inflight.items {
		busy[r.fair]++
	}
	return busy
}

// takeUnder removes and returns a ready record whose fairness key has fewer than limit records
// in flight by busy, nil when there is none; the queue must have a ready record.
func (q *queue) takeUnder(rng *rand.Rand, busy map[string]int, limit int) *record {
	if q.fair == nil {
		// Not fair (yet): every ready record is of the empty key.
		if busy[""] >= limit {
			return nil
		}
		return q.takeRandom(rng)
	}
	for i, l := range q.fair.turns {
		if busy[l.key] < limit {
			return q.fairTakeAt(rng, i)
		}
	}
	return nil
}
