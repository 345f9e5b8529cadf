package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

var _ core.Splitter = (*Backend)(nil)

// Split settles a claim whose batch the engine split by per-message outcomes: under one lock
// the claim's batch is removed and each part stored as a new batch of the queue (ready, or
// delayed by its Delay), so that no Fetch sees both. A part must be of the claim's queue and
// carry no Key (an ordered batch keeps its key's head through Retry instead). A lost lease
// returns an error wrapping core.ErrLeaseLost and stores nothing; a settled claim is a no-op.
func (be *Backend) Split(ctx context.Context, c *core.Claim, parts []core.Part) error {
	for _, p := range parts {
		if p.Queue != c.QueueName() || p.Key != "" || p.ID == "" {
			return fmt.Errorf("%w: memory: split %s: part %q of queue %q with key %q; parts are unkeyed batches of the claim's queue with an id", core.ErrInvalidConfig, c.String(), p.ID, p.Queue, p.Key)
		}
	}
	return be.settle(ctx, "split", c, func(q *queue, r *record, now time.Time) {
		r.state, r.body = stateGone, nil
		q.finishKeyed(r, now)
		for _, p := range parts {
			rec := &record{id: p.ID, q: q, body: clone(p.Body), lead: max(p.Lead, 0), fair: p.FairKey} // a part keeps its batch's priority and fairness key
			if rec.lead > 0 && !q.ranked {
				q.rankReady()
			}
			if rec.fair != "" && q.fair == nil {
				q.makeFair()
			}
			if d := p.DelayFrom(now); d > 0 {
				q.pushDelayed(rec, now.Add(d))
			} else {
				q.pushReady(rec, now)
			}
		}
	})
}
