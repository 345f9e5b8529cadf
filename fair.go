package txmq

import (
	"fmt"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// FairKey gives the messages of a publish call the fairness key of a Fair queue: a tenant,
// an account, a customer. The queue's ready batches are handed out round-robin across the
// keys (see QueueConfig.Fair), so one key's backlog does not hold back another key's
// messages. A key is 1 to core.MaxKeyBytes (128) bytes of printable ASCII without spaces, as
// an ordering key. Without it a publish on a Fair queue takes the ordering key (Ordered
// queues) or the empty key. On a queue that is not Fair it is an error naming the queue.
func FairKey(key string) PublishOption {
	return func(o *publishOptions) { o.fairKey, o.fairSet = key, true }
}

// publishFairKey returns a publish call's fairness key: its FairKey option on a fair queue,
// else the ordering key on an ordered fair queue, else empty; an error for a fairness key on
// a queue that is not fair, and for one that is not a valid key.
func publishFairKey(spec *queueSpec, o publishOptions) (string, error) {
	switch {
	case !spec.Fair && o.fairSet:
		return "", fmt.Errorf("%w: queue %q is not Fair, so txmq.FairKey(%q) would promise a share it does not keep; declare the queue with Fair: true, or drop the fairness key", core.ErrInvalidConfig, spec.Name, envelope.Truncate([]byte(o.fairKey), 40))
	case !spec.Fair:
		return "", nil
	case !o.fairSet && spec.Ordered:
		return o.key, nil
	case !o.fairSet:
		return "", nil
	case !core.ValidKey(o.fairKey):
		return "", fmt.Errorf("%w: queue %q: fairness key %q is not 1 to %d bytes of printable ASCII without spaces; hash it (for example hex of SHA-256) to make it portable", core.ErrInvalidConfig, spec.Name, envelope.Truncate([]byte(o.fairKey), 40), core.MaxKeyBytes)
	}
	return o.fairKey, nil
}
