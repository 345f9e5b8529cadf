package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/txmq/txmq/core"
)

var _ core.KeyOrderer = (*Backend)(nil)

// OrdersKeys reports that the Backend enforces per-key order (core.KeyOrderer): always nil.
func (be *Backend) OrdersKeys() error { return nil }

// lane is the batches of one ordered queue and key, oldest first. Only its first record (the
// head) is ever ready, delayed or in flight; the others wait, held, until every record before
// them is acked or dropped. A retried or expired head stays first.
type lane struct {
	key  string
	recs []*record
}

// pushKeyed stores a keyed record at now: first in a new lane it is scheduled as any record
// (due at due; zero or past: ready at once), behind others it is held with its due time kept
// for when it reaches the head.
func (q *queue) pushKeyed(r *record, key string, due, now time.Time) {
	if q.lanes == nil {
		q.lanes = make(map[string]*lane)
	}
	l := q.lanes[key]
	if l == nil {
		l = &lane{key: key}
		q.lanes[key] = l
	}
	r.lane = l
	l.recs = append(l.recs, r)
	if len(l.recs) > 1 {
		r.state, r.at, r.idx = stateHeld, due, -1
		q.held++
		return
	}
	q.schedule(r, due, now)
}

// schedule makes r ready when due is not after now, else delayed until due.
func (q *queue) schedule(r *record, due, now time.Time) {
	if due.After(now) {
		q.pushDelayed(r, due)
	} else {
		q.pushReady(r, now)
	}
}

// finishKeyed takes a settled (acked or dropped) head out of its lane and schedules the next
// record of the lane, which waited held; an empty lane is forgotten. A record without a lane
// is left alone.
func (q *queue) finishKeyed(r *record, now time.Time) {
	l := r.lane
	if l == nil {
		return
	}
	r.lane = nil
	if len(l.recs) == 0 || l.recs[0] != r {
		return // not the head: cannot happen, only heads are handed out
	}
	l.recs[0] = nil
	l.recs = l.recs[1:]
	if len(l.recs) == 0 {
		delete(q.lanes, l.key)
		return
	}
	next := l.recs[0]
	q.held--
	q.schedule(next, next.at, now)
}

// removeKeyed takes the unclaimed keyed record r (ready, delayed or held) out of its lane, as a
// cancel does: a head is finished as an ack finishes it (the next record of its key is
// scheduled, an emptied lane forgotten); a held record leaves its lane, the others keeping
// their order. r must already be out of the ready slice and the delayed heap. It reports
// whether the key's next record was scheduled (fetches may want to know).
func (q *queue) removeKeyed(r *record, now time.Time) bool {
	l := r.lane
	if l == nil {
		return false
	}
	i := slices.Index(l.recs, r)
	switch {
	case i == 0:
		q.finishKeyed(r, now)
		return len(l.recs) > 0
	case i > 0:
		l.recs = slices.Delete(l.recs, i, i+1)
		q.held--
	}
	r.lane = nil
	return false
}

// heldRecord returns the record id held behind its key's head, or nil.
func (q *queue) heldRecord(id string) *record {
	for _, l := range q.lanes {
		for _, r := range l.recs[1:] {
			if r.id == id {
				return r
			}
		}
	}
	return nil
}

var _ core.KeyHolder = (*Backend)(nil)

// HoldsKey implements core.KeyHolder: whether queue holds any batch of key (ready, delayed,
// held behind the key's head or in flight).
func (be *Backend) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memory: holds key %q of queue %q: %w", key, queue, err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err := be.usableLocked("holds key", queue); err != nil {
		return false, err
	}
	q, ok := be.queues[queue]
	return ok && q.lanes[key] != nil, nil
}
