package drain

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq/core"
)

var _ core.KeyOrderer = (*Backend)(nil)

// OrdersKeys implements core.KeyOrderer: nil when the primary enforces per-key order and the
// wrapper drains at most one old backend, which enforces per-key order and can tell whether it
// holds a key (core.KeyHolder); otherwise an error saying which backend falls short, and a node
// over the wrapper refuses ordered queues with it.
func (d *Backend) OrdersKeys() error {
	if err := core.OrdersKeys(d.primary); err != nil {
		return fmt.Errorf("drain: the primary backend: %w", err)
	}
	if len(d.olds) > 1 {
		return fmt.Errorf("drain: per-key order is kept with one old backend at a time and %d are configured; drain them one after the other", len(d.olds))
	}
	for _, o := range d.olds {
		if err := core.OrdersKeys(o.b); err != nil {
			return fmt.Errorf("drain: old backend %s: %w", o.name, err)
		}
		if core.KeyHolderOf(o.b) == nil {
			return fmt.Errorf("drain: old backend %s (%T) does not report whether it holds a key (core.KeyHolder), which the wrapper needs to publish a key behind its old batches", o.name, o.b)
		}
	}
	return nil
}

// holder returns the old backend that still holds a batch of b's queue and key (ready,
// delayed, waiting or in flight), or nil when none does (or b has no key). A backend that
// cannot answer makes it return an error: the batch cannot be placed without the answer.
func (d *Backend) holder(ctx context.Context, b core.OutgoingBatch) (*oldBackend, error) {
	if b.Key == "" {
		return nil, nil
	}
	for _, o := range d.olds {
		if !o.acquire() {
			continue
		}
		h := core.KeyHolderOf(o.b)
		if h == nil {
			continue // OrdersKeys refused the ordered queue already
		}
		held, err := h.HoldsKey(ctx, b.Queue, b.Key)
		d.noteOld(ctx, o, "asking about a key", err)
		if err != nil {
			return nil, fmt.Errorf("txmq drain: publish of batch %s (queue %q, ordering key %q): asking old backend %s whether it still holds the key: %w", b.ID, b.Queue, b.Key, o.name, err)
		}
		if held {
			return o, nil
		}
	}
	return nil, nil
}

// published records that a batch is being published to o: o is polled again if it was
// drained, and a depth check running meanwhile does not count as empty.
func (o *oldBackend) published() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pubs++
	if o.drained {
		o.drained = false
		o.zeros, o.zeroSince = 0, time.Time{}
		clear(o.gates)
	}
}
