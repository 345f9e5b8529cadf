package memory

import (
	"math/rand/v2"
	"time"
)

// state is where a record is: exactly one of the queue's three collections, or gone.
type state uint8

const (
	stateReady    state = iota + 1 // in queue.ready: due and unclaimed
	stateDelayed                   // in queue.delayed, keyed by its due time
	stateInFlight                  // in queue.inflight, keyed by its lease end
	stateGone                      // acked or dropped
	stateHeld                      // in a lane behind an earlier record of its key; at is its due time
)

// record is one stored batch.
type record struct {
	id         string
	q          *queue
	body       []byte
	deliveries int // handouts since stored or last rewritten by Retry

	state state
	at    time.Time     // due time while delayed, lease end while in flight, claimable since while ready
	idx   int           // position in the heap of its state (unused while ready)
	lease *lease        // the current claim while in flight, nil otherwise
	lane  *lane         // the record's ordering lane (a keyed batch), nil otherwise
	lead  time.Duration // core.OutgoingBatch.Lead: sorts as if due this much earlier
	fair  string        // core.OutgoingBatch.FairKey: the lane it is ready in on a fair queue
	// started: a claim handed the record out once (a unique key held until started is free).
	started bool
}

// queue is the state of one queue name. Every field is guarded by Backend.mu.
type queue struct {
	name string

	// ready holds due, unclaimed records, oldest first but for the picks' swaps; a claim takes
	// a random one of the first pickWindow, swapping the first into its place, so picks are
	// O(1) and never FIFO. Unused once the queue is ranked.
	ready []*record
	// ranked: a batch with a lead (a priority) was published to the queue; from then on its
	// ready records are in rank, a min-heap by claimable-since minus lead, and a claim takes
	// the first (see priority.go).
	ranked bool
	rank   timeHeap
	// fair: a batch with a fairness key was published to the queue; from then on its ready
	// records are kept per key and claimed round-robin across the keys (see fair.go), and
	// ready and rank are unused.
	fair *fairShare
	// delayed is a min-heap of records by due time.
	delayed timeHeap
	// inflight is a min-heap of claimed records by lease end; its length is the number of
	// claims, which the exclusive check reads.
	inflight timeHeap

	// lanes are the ordered keys with stored batches (see lane); held counts the records
	// waiting in them behind their key's head.
	lanes map[string]*lane
	held  int

	// waiters are the fetches blocked on this queue.
	waiters map[*waiter]struct{}

	// marks are the caller ids held for deduplication (see Backend.DedupIDs).
	marks idMarks

	// uniq are the unique keys taken by the queue's batches (see unique.go), pruned when the
	// map reaches uniqPrune entries.
	uniq      map[string]*uniqueHold
	uniqPrune int
}

// waiter is one blocked Fetch; ch has room for one wake-up so notify never blocks.
type waiter struct{ ch chan struct{} }

// pushReady makes r ready; since is when it became claimable (Depths reports the oldest).
func (q *queue) pushReady(r *record, since time.Time) {
	r.state, r.at, r.idx = stateReady, since, -1
	if q.fair != nil {
		q.fairPush(r)
		return
	}
	if q.ranked {
		q.rank.push(r)
		return
	}
	q.ready = append(q.ready, r)
}

func (q *queue) pushDelayed(r *record, due time.Time) {
	r.state, r.at = stateDelayed, due
	q.delayed.push(r)
}

func (q *queue) pushInFlight(r *record, leaseEnd time.Time) {
	r.state, r.at, r.started = stateInFlight, leaseEnd, true
	q.inflight.push(r)
}

// oldestReady is the earliest time a ready record became claimable, zero when none is ready.
func (q *queue) oldestReady() time.Time {
	var oldest time.Time
	for _, r := range q.readyRecords() {
		if oldest.IsZero() || r.at.Before(oldest) {
			oldest = r.at
		}
	}
	return oldest
}

// takeRandom removes and returns a random ready record among the pickWindow oldest (the first
// by rank on a ranked queue); the queue must have one (readyLen).
func (q *queue) takeRandom(rng *rand.Rand) *record {
	if q.fair != nil {
		return q.fairTake(rng)
	}
	if q.ranked {
		return q.rank.pop()
	}
	i := rng.IntN(min(len(q.ready), pickWindow))
	r := q.ready[i]
	q.ready[i] = q.ready[0]
	q.ready[0] = nil
	if q.ready = q.ready[1:]; len(q.ready) == 0 {
		q.ready = nil // let the array go: the next push starts a small one
	}
	return r
}

// release takes an in-flight record out of the in-flight heap and detaches its lease.
func (q *queue) release(r *record) {
	q.inflight.remove(r.idx)
	r.lease = nil
}

// advance applies the passage of time up to now: expired leases put their records back as
// ready (their Deliveries grow at the next handout), and due delayed records become ready. It
// reports whether anything became ready.
func (q *queue) advance(now time.Time) bool {
	moved := false
	for q.inflight.Len() > 0 && !now.Before(q.inflight.peek().at) {
		r := q.inflight.pop()
		r.lease = nil
		q.pushReady(r, r.at)
		moved = true
	}
	for q.delayed.Len() > 0 && !q.delayed.peek().at.After(now) {
		r := q.delayed.pop()
		q.pushReady(r, r.at)
		moved = true
	}
	return moved
}

// nextEvent is the earliest time something may become claimable without a call: the next due
// time or lease end. It is zero when nothing is pending.
func (q *queue) nextEvent() time.Time {
	var next time.Time
	if q.delayed.Len() > 0 {
		next = q.delayed.peek().at
	}
	if q.inflight.Len() > 0 {
		if t := q.inflight.peek().at; next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// notify wakes every fetch blocked on this queue.
func (q *queue) notify() {
	for w := range q.waiters {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// pickWindow is how many of the oldest ready records a claim picks from at random. Over a
// backlog, claims follow publish order loosely (never FIFO: a listener that depends on order
// still breaks in tests) and read records and bodies stored next to each other; a pick from
// the whole backlog read cold memory for each claim (measured: 11% of the throughput at one
// message per batch).
const pickWindow = 16
