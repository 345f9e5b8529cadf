package memory

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
)

var _ core.BatchExpediter = (*Backend)(nil)

// ExpediteBatch implements core.BatchExpediter: the unclaimed batch id of queue, delayed or
// waiting to retry, takes a copy of body and becomes due now and claimable at once; one held behind the head of its
// ordering key gets its own due time set to now and still waits for its key. A ready batch is
// left as it is; one in flight is not changed (core.ErrNotCancellable), nor one that is gone
// (core.ErrMessageNotFound).
func (be *Backend) ExpediteBatch(ctx context.Context, queue, id string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: expedite batch %s of queue %q: %w", id, queue, err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if err := be.usableLocked("expedite batch", queue); err != nil {
		return err
	}
	q, ok := be.queues[queue]
	if !ok {
		return fmt.Errorf("%w: memory: queue %q holds no batch %s", core.ErrMessageNotFound, queue, id)
	}
	now := be.clock()
	q.advance(now)
	r := q.find(id)
	switch {
	case r == nil:
		return fmt.Errorf("%w: memory: queue %q holds no batch %s (completed or dropped)", core.ErrMessageNotFound, queue, id)
	case r.state == stateInFlight:
		return fmt.Errorf("%w: memory: batch %s of queue %q is running", core.ErrNotCancellable, id, queue)
	case r.state == stateHeld:
		r.at, r.body = now, clone(body)
	case r.state == stateDelayed:
		r.at, r.body = now, clone(body)
		q.delayed.fix(r.idx)
		if q.advance(now) {
			q.notify()
		}
	}
	return nil
}
