package txmq

import (
	"github.com/txmq/txmq/core"
)

// RateLimit caps how many batches of a queue start per period (QueueConfig.RateLimit): a
// token bucket that holds at most Burst tokens (default Batches) and gains Batches tokens per
// Per; starting a batch takes one.
type RateLimit = core.RateLimit

// Limiter hands out the start tokens of rate-limited queues; nodes that share one share each
// queue's limit cluster-wide. The outbox's *outbox.Limits is one (txmq.Open sets
// NodeOptions.Limiter to Store.Limits()); without one, each node limits on its own.
type Limiter = core.Limiter

func rateDefaults(r RateLimit) RateLimit {
	if r != (RateLimit{}) && r.Burst == 0 {
		r.Burst = r.Batches
	}
	return r
}
