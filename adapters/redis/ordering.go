package redis

import (
	"context"
	"fmt"

	"github.com/txmq/txmq/core"
)

// Ordered queues (core.KeyOrderer). Each queue's batches with an ordering key form one linked
// list per key, kept in four hashes under the queue's hash tag (so every script still touches
// one Redis Cluster slot, and every key it touches is declared in KEYS):
//
//	{txmq:ledger}:ktail  HASH  key -> the key's last stored batch id
//	{txmq:ledger}:knext  HASH  batch id -> the next batch id of its key
//	{txmq:ledger}:bkey   HASH  batch id -> its key
//	{txmq:ledger}:hdue   HASH  held batch id -> its due time (ms, server clock)
//
// Only a key's first batch (the head) is ever in the due or lease set; the publish script
// appends a batch behind the tail in no set at all (held), and the ack/drop of the head makes
// the next one due at its own due time (or at once), in the same script. A retry or an
// expired lease puts the head back in the due set, still first, so it runs again before the
// next batch of its key: the head's lease is the per-key lease. Claims are unchanged.

var _ core.KeyOrderer = (*Backend)(nil)

// OrdersKeys reports that the Backend enforces per-key order (core.KeyOrderer): always nil.
func (be *Backend) OrdersKeys() error { return nil }

var _ core.KeyHolder = (*Backend)(nil)

// HoldsKey implements core.KeyHolder: whether queue holds any batch of key (ready, delayed,
// held or in flight), which is whether the key has a tail in ktail (one HEXISTS). A drain
// wrapper asks it of its old backend (package drain).
func (be *Backend) HoldsKey(ctx context.Context, queue, key string) (bool, error) {
	if err := be.usable("holds key", queue); err != nil {
		return false, err
	}
	held, err := be.rdb.HExists(ctx, be.keys.keys(queue).script[4], key).Result()
	if err != nil {
		return false, be.wrap(fmt.Sprintf("does queue %q hold batches of ordering key %q", queue, key), err)
	}
	return held, nil
}
