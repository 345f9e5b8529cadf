package memory

import (
	"context"

	"github.com/txmq/txmq/core"
)

var _ core.BatchExpediter = (*Backend)(nil)

// ExpediteBatch implements core.BatchExpediter: the unclaimed batch id of queue, delayed or
// waiting to retry, takes a copy of body and becomes due now and claimable at once; one held behind the head of its
// ordering key gets its own due time set to now and still waits for its key. A ready batch is
// left as it is; one in flight is not changed (core.ErrNotCancellable), nor one that is gone
// (core.ErrMessageNotFound).
func (be *Backend) ExpediteBatch(ctx context.Context, queue, id string, body []byte) error {
	be.mu.Lock()
	defer be.mu.Unlock()
	q, r, now, err := be.unclaimedLocked(ctx, "expedite batch", queue, id, "")
	switch {
	case err != nil:
		return err
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
