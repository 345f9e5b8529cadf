package memory

import (
	"time"

	"github.com/txmq/txmq/core"
)

// uniqueHold is the batch that took a unique key of a queue (core.UniqueKeeper), and until when
// a UniqueWindow key is held.
type uniqueHold struct {
	rec   *record
	until time.Time
}

// KeepsUnique implements core.UniqueKeeper: every mode, on the records themselves.
func (be *Backend) KeepsUnique(core.UniqueMode) error { return nil }

// uniqueLocked checks b's unique key on q at now, with be.mu held, for the record rec that is
// about to be stored: it returns stored true when b itself holds the key already (a retried
// publish: store nothing, report success), a *core.UniqueError when another batch holds it,
// and otherwise takes the key for rec, first removing the unstarted batch a debounce replaces.
func (q *queue) uniqueLocked(b core.OutgoingBatch, rec *record, now time.Time) (stored bool, err error) {
	u := b.Unique
	h := q.uniq[u.Key]
	if h != nil {
		hold := core.UniqueHolder{Batch: h.rec.id, InWindow: now.Before(h.until), Live: h.rec.state != stateGone, Started: h.rec.started}
		switch hold.Judge(u.Mode, b.ID) {
		case core.UniqueSelf:
			return true, nil
		case core.UniqueHeld:
			return false, &core.UniqueError{Queue: b.Queue, Key: u.Key, Mode: u.Mode, Kept: h.rec.id}
		case core.UniqueReplace:
			q.removeUnclaimed(h.rec, now)
		}
	}
	if q.uniq == nil {
		q.uniq = make(map[string]*uniqueHold)
	}
	if len(q.uniq) >= q.uniqPrune {
		q.pruneUnique(now)
	}
	q.uniq[u.Key] = &uniqueHold{rec: rec, until: now.Add(u.Window)}
	return false, nil
}

// pruneUnique forgets the keys no batch holds any more (amortised: it runs when the map has
// doubled since the last prune).
func (q *queue) pruneUnique(now time.Time) {
	for k, h := range q.uniq {
		if h.rec.state == stateGone && !now.Before(h.until) {
			delete(q.uniq, k)
		}
	}
	q.uniqPrune = max(2*len(q.uniq), 1024)
}

// removeUnclaimed takes the unclaimed record r (ready, delayed or held in a lane) out of q, as
// a cancel does, and marks it gone.
func (q *queue) removeUnclaimed(r *record, now time.Time) {
	switch r.state {
	case stateReady:
		q.removeReady(r)
	case stateDelayed:
		q.delayed.remove(r.idx)
	}
	if q.removeKeyed(r, now) {
		q.notify()
	}
	r.state, r.body = stateGone, nil
}
