package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/txmq/txmq/core"
)

var (
	_ core.BatchInspector = (*Backend)(nil)
	_ core.BatchEditor    = (*Backend)(nil)
)

// InspectBatches implements core.BatchInspector: it calls fn for each batch of the named
// queues (every queue when queues is nil), ready, delayed and in flight, under the backend's
// lock (fn must not call the backend). Acked and dropped batches are gone.
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
		for _, r := range q.ready {
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
	}
	return nil
}

// ReplaceBatch implements core.BatchEditor: it replaces the body of the unclaimed batch id of
// queue with a copy of body (its Deliveries and due time unchanged), or removes the batch when
// body is nil. A batch in flight is not changed (core.ErrNotCancellable), nor one that is
// gone (core.ErrMessageNotFound).
func (be *Backend) ReplaceBatch(ctx context.Context, queue, id string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: replace batch %s of queue %q: %w", id, queue, err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err := be.usableLocked("replace batch", queue); err != nil {
		return err
	}
	q, ok := be.queues[queue]
	if !ok {
		return fmt.Errorf("%w: memory: queue %q holds no batch %s", core.ErrMessageNotFound, queue, id)
	}
	q.advance(be.clock())
	for i, r := range q.ready {
		if r.id == id {
			if body == nil {
				last := len(q.ready) - 1
				q.ready[i] = q.ready[last]
				q.ready[last] = nil
				q.ready = q.ready[:last]
				r.state, r.body = stateGone, nil
			} else {
				r.body = clone(body)
			}
			return nil
		}
	}
	for _, r := range q.delayed.items {
		if r.id == id {
			if body == nil {
				q.delayed.remove(r.idx)
				r.state, r.body = stateGone, nil
			} else {
				r.body = clone(body)
			}
			return nil
		}
	}
	for _, r := range q.inflight.items {
		if r.id == id {
			return fmt.Errorf("%w: memory: batch %s of queue %q is running; a running batch is not interrupted", core.ErrNotCancellable, id, queue)
		}
	}
	return fmt.Errorf("%w: memory: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
}
