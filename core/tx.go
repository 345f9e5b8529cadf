package core

// Helpers of the transactional store contract (Tx, Pending, Batcher in stores.go).

import (
	"context"
	"fmt"
	"time"
)

type txKey struct{}

// ContextWithTx returns ctx carrying tx, so publishes made with it join the transaction.
func ContextWithTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFromContext returns the transaction carried by ctx, if any.
func TxFromContext(ctx context.Context) (Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(Tx)
	return tx, ok && tx != nil
}

// Batches applies the queue's Dedup to the messages of ps, cuts them into batches of at most
// MaxBatchMessages and at most the batch size limit in force at publish (see the package doc's
// size limits), and encodes each. All of ps must be of one queue; messages with different
// NotBefore times (or, on an ordered queue, different keys) go in different batches (in order of first appearance; on an ordered queue in publish order per key); each batch
// keeps the trace context of each of its messages (that of its publish). Each batch's Delay is its due time minus the publishing node's
// clock now (now when the Pending was not made by a node). The outbox calls it before commit.
func Batches(ps []*Pending, now time.Time) ([]OutgoingBatch, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	if ps[0].Batcher == nil {
		return nil, fmt.Errorf("%w: Pending for queue %q was not made by a node (no Batcher)", ErrInvalidConfig, ps[0].Queue)
	}
	return ps[0].Batcher.Batches(ps, now)
}
