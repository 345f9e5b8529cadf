package memory

import "slices"

// Priorities (core.Prioritizer): a batch published with a lead (core.OutgoingBatch.Lead, its
// priority times its queue's aging step) makes its queue ranked. A ranked queue keeps its
// ready records in a heap by the time each became claimable minus its lead, and a claim
// takes the first: the higher priority first among batches that became ready at about the
// same time, the older first once the difference in waiting exceeds the difference in lead.
// Delayed and in-flight records keep their place in their own heaps (by due time and lease
// end, never early); a retry or an expired lease makes a record ready again with its lead.
// A queue never goes back to unranked (its picks are then in rank order, not random).

// Prioritizes implements core.Prioritizer: the memory backend honours priorities.
func (be *Backend) Prioritizes() error { return nil }

// rankReady makes q ranked, moving its ready records into the rank heap.
func (q *queue) rankReady() {
	q.ranked = true
	q.rank.byLead = true
	if q.fair != nil {
		q.fairRank()
		return
	}
	for _, r := range q.ready {
		q.rank.push(r)
	}
	clear(q.ready)
	q.ready = nil
}

// readyLen is the number of ready records.
func (q *queue) readyLen() int {
	if q.fair != nil {
		return q.fair.n
	}
	return len(q.ready) + q.rank.Len()
}

// readyRecords returns the ready records (the queue's own slices: do not change them).
func (q *queue) readyRecords() []*record {
	if q.fair != nil {
		return q.fairRecords()
	}
	if q.ranked {
		return q.rank.items
	}
	return q.ready
}

// removeReady takes a ready record out of the queue's ready set.
func (q *queue) removeReady(r *record) {
	if q.fair != nil {
		q.fairRemove(r)
		return
	}
	if q.ranked {
		q.rank.remove(r.idx)
		return
	}
	i := slices.Index(q.ready, r)
	last := len(q.ready) - 1
	q.ready[i] = q.ready[last]
	q.ready[last] = nil
	q.ready = q.ready[:last]
}
