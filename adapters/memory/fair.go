package memory

import (
	"math/rand/v2"
	"slices"
)

// Fair share by key (core.FairSharer): a batch published with a fairness key
// (core.OutgoingBatch.FairKey) makes its queue fair. A fair queue keeps its ready records
// per key, in lanes (random picks, or a rank heap on a prioritized queue, as the unfair
// queue's one ready set), and the lanes that hold ready records in turns, a FIFO: a claim
// takes one record of the first lane in turn, which goes to the end of the turn if it still
// has ready records and leaves it otherwise; a lane that gets its first ready record joins
// the end. So a ready record waits at most one claim per other key with ready records.
// Ready records without a key (published before the queue became fair, or on purpose) are the
// lane of the empty key. A queue never goes back to unfair.

// SharesFairly implements core.FairSharer: the memory backend shares claims fairly by key.
func (be *Backend) SharesFairly() error { return nil }

// SharesFairlyByPriority implements core.FairPrioritizer: each key's lane is ranked on a
// prioritized queue.
func (be *Backend) SharesFairlyByPriority() error { return nil }

// fairShare is a fair queue's ready records (see the comment at the top of this file).
type fairShare struct {
	lanes map[string]*fairLane // the keys with ready records
	turns []*fairLane          // the same lanes, in turn: the first is served next
	n     int                  // ready records in all lanes
}

// fairLane is the ready records of one fairness key.
type fairLane struct {
	key   string
	ready []*record // unranked: picked at random
	rank  timeHeap  // ranked (a prioritized queue): by claimable-since minus lead
}

func (l *fairLane) len() int { return len(l.ready) + l.rank.Len() }

// makeFair makes q fair, moving its ready records into the lane of the empty key (records
// published before had no fairness key).
func (q *queue) makeFair() {
	q.fair = &fairShare{lanes: make(map[string]*fairLane)}
	old := append(q.ready, q.rank.items...)
	q.ready, q.rank.items = nil, nil
	for _, r := range old {
		q.fairPush(r)
	}
}

// fairPush adds the ready record r to its key's lane, the lane to the turns when it was
// empty.
func (q *queue) fairPush(r *record) {
	f := q.fair
	l := f.lanes[r.fair]
	if l == nil {
		l = &fairLane{key: r.fair, rank: timeHeap{byLead: true}}
		f.lanes[r.fair] = l
		f.turns = append(f.turns, l)
	}
	if q.ranked {
		l.rank.push(r)
	} else {
		l.ready = append(l.ready, r)
	}
	f.n++
}

// fairTake removes and returns a ready record of the first lane in turn (at random, or the
// first by rank on a ranked queue) and moves the lane to the end of the turns, or out of them
// when it has no more. The queue must have a ready record.
func (q *queue) fairTake(rng *rand.Rand) *record { return q.fairTakeAt(rng, 0) }

// fairTakeAt is fairTake for the lane at position i of the turns: the lanes before it keep
// their places (they were passed over, see takeUnder).
func (q *queue) fairTakeAt(rng *rand.Rand, i int) *record {
	f := q.fair
	l := f.turns[i]
	copy(f.turns[i:], f.turns[i+1:])
	f.turns[len(f.turns)-1] = nil
	f.turns = f.turns[:len(f.turns)-1]
	var r *record
	if q.ranked && l.rank.Len() > 0 {
		r = l.rank.pop()
	} else {
		i := rng.IntN(len(l.ready))
		r = l.ready[i]
		l.ready[i] = l.ready[len(l.ready)-1]
		l.ready[len(l.ready)-1] = nil
		l.ready = l.ready[:len(l.ready)-1]
	}
	f.n--
	if l.len() > 0 {
		f.turns = append(f.turns, l)
	} else {
		delete(f.lanes, l.key)
	}
	return r
}

// fairRemove takes the ready record r out of its lane (a cancel), and the lane out of the
// turns when it has no more.
func (q *queue) fairRemove(r *record) {
	f := q.fair
	l := f.lanes[r.fair]
	if l == nil {
		return
	}
	if r.idx >= 0 && r.idx < l.rank.Len() && l.rank.items[r.idx] == r {
		l.rank.remove(r.idx)
	} else if i := slices.Index(l.ready, r); i >= 0 {
		last := len(l.ready) - 1
		l.ready[i] = l.ready[last]
		l.ready[last] = nil
		l.ready = l.ready[:last]
	} else {
		return
	}
	f.n--
	if l.len() == 0 {
		delete(f.lanes, l.key)
		f.turns = slices.DeleteFunc(f.turns, func(x *fairLane) bool { return x == l })
	}
}

// fairRank moves every lane's ready records into its rank heap (rankReady on a fair queue).
func (q *queue) fairRank() {
	for _, l := range q.fair.lanes {
		for _, r := range l.ready {
			l.rank.push(r)
		}
		clear(l.ready)
		l.ready = nil
	}
}

// fairRecords returns a fair queue's ready records, lane by lane in turn (a new slice).
func (q *queue) fairRecords() []*record {
	out := make([]*record, 0, q.fair.n)
	for _, l := range q.fair.turns {
		out = append(out, l.ready...)
		out = append(out, l.rank.items...)
	}
	return out
}
