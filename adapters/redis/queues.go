package redis

import (
	"context"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// Queues lists the queues with stored batches (ready, in flight or delayed) under the
// Backend's prefix (core.QueueLister): a SCAN for their body hashes on every master, so its
// cost grows with the keys under the prefix. A queue whose batches were all acked has no key
// left and is not listed.
func (be *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := be.usable("queues", ""); err != nil {
		return nil, err
	}
	names, err := be.queueNames(ctx)
	if err != nil {
		return nil, be.wrap("list queues", err)
	}
	return names, nil
}
