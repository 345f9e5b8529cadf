package memory

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/txmq/txmq/core"
)

var (
	_ core.BatchInspector = (*Backend)(nil)
	_ core.BatchEditor    = (*Backend)(nil)
)

// InspectBatches implements core.BatchInspector: it calls fn for each batch of the named
// queues (every queue when queues is nil), ready, delayed, in flight and held behind the head
// of its ordering key, under the backend's lock (fn must not call the backend). A held batch
// is reported delayed, as Depths counts it, with its own due time (zero when it was published
// without a delay): it waits for its key's earlier batches. Acked and dropped batches are gone.
func (be *Backend) InspectBatches(ctx context.Context, queues []string, fn func(core.StoredBatch) bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: inspect batches: %w", err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err := be.usableLocked("inspect batches", ""); err != nil {
		return err
	}
	if queues == nil {
		for name := range be.queues {
			queues = append(queues, name)
		}
		sort.Strings(queues)
	}
	now := be.clock()
	for _, name := range queues {
		q, ok := be.queues[name]
		if !ok {
			continue
		}
		q.advance(now)
		for _, r := range q.readyRecords() {
			if !fn(core.StoredBatch{Queue: name, ID: r.id, Body: r.body, State: core.BatchReady, Deliveries: r.deliveries}) {
				return nil
			}
		}
		for _, r := range q.delayed.items {
			if !fn(core.StoredBatch{Queue: name, ID: r.id, Body: r.body, State: core.BatchDelayed, Due: r.at, Deliveries: r.deliveries}) {
				return nil
			}
		}
		for _, r := range q.inflight.items {
			if !fn(core.StoredBatch{Queue: name, ID: r.id, Body: r.body, State: core.BatchInFlight, Deliveries: r.deliveries}) {
				return nil
			}
		}
		for _, l := range q.lanes {
			for _, r := range l.recs[1:] {
				if !fn(core.StoredBatch{Queue: name, ID: r.id, Body: r.body, State: core.BatchDelayed, Due: r.at, Deliveries: r.deliveries}) {
					return nil
				}
			}
		}
	}
	return nil
}

// ReplaceBatch implements core.BatchEditor: it replaces the body of the unclaimed batch id of
// queue with a copy of body (its Deliveries and due time unchanged), or removes the batch when
// body is nil. That batch may be held behind the head of its ordering key. Removing a key's
// head lets the key's next batch become due, as an ack does; removing a held batch leaves the
// rest of its key in order; a key left with no batch is no longer held (HoldsKey). A batch in
// flight is not changed (core.ErrNotCancellable), nor one that is gone
// (core.ErrMessageNotFound).
func (be *Backend) ReplaceBatch(ctx context.Context, queue, id string, body []byte) error {
	be.mu.Lock()
	defer be.mu.Unlock()
	q, r, now, err := be.unclaimedLocked(ctx, "replace batch", queue, id, "; a running batch is not interrupted")
	switch {
	case err != nil:
		return err
	case body != nil:
		r.body = clone(body)
		return nil
	}
	switch r.state {
	case stateReady:
		q.removeReady(r)
	case stateDelayed:
		q.delayed.remove(r.idx)
	}
	if q.removeKeyed(r, now) {
		q.notify() // the key's next batch may be claimable now
	}
	r.state, r.body = stateGone, nil
	return nil
}

// unclaimedLocked finds the batch id of queue for an operator's edit (op names it in errors;
// why ends the error of a batch in flight), with be.mu held and the queue advanced to now: a
// batch that is gone is core.ErrMessageNotFound, one in flight core.ErrNotCancellable.
func (be *Backend) unclaimedLocked(ctx context.Context, op, queue, id, why string) (*queue, *record, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("memory: %s %s of queue %q: %w", op, id, queue, err)
	}
	if err := be.usableLocked(op, queue); err != nil {
		return nil, nil, time.Time{}, err
	}
	q, ok := be.queues[queue]
	if !ok {
		return nil, nil, time.Time{}, fmt.Errorf("%w: memory: queue %q holds no batch %s", core.ErrMessageNotFound, queue, id)
	}
	now := be.clock()
	q.advance(now)
	r := q.find(id)
	switch {
	case r == nil:
		return nil, nil, now, fmt.Errorf("%w: memory: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case r.state == stateInFlight:
		return nil, nil, now, fmt.Errorf("%w: memory: batch %s of queue %q is running%s", core.ErrNotCancellable, id, queue, why)
	}
	return q, r, now, nil
}

// find returns the stored record id of the queue (ready, delayed, in flight or held), or nil.
func (q *queue) find(id string) *record {
	for _, r := range q.readyRecords() {
		if r.id == id {
			return r
		}
	}
	for _, r := range q.delayed.items {
		if r.id == id {
			return r
		}
	}
	for _, r := range q.inflight.items {
		if r.id == id {
			return r
		}
	}
	return q.heldRecord(id)
}
