package txmq

import (
	"context"
	"fmt"
	"sync"

	"github.com/txmq/txmq/core"
)

// handedKeys remembers the ordering keys of the batches this node handed to the outbox
// (NodeOptions.Handoff), so that a later batch of such a key follows them there rather than
// overtaking them on the backend: after an outage the outbox publishes its rows some time
// after the backend answers again, while new publishes of the key reach it at once. A key is
// forgotten once the outbox, asked before a later batch of it is written, holds no row of it.
// Only a Handoff that implements core.KeyHolder (the outbox Store does) can answer; with
// another Handoff, keys are not tracked.
type handedKeys struct {
	mu   sync.Mutex
	keys map[[2]string]struct{} // {queue, key}
}

// add records that a batch of queue and key was handed to the outbox.
func (h *handedKeys) add(queue, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = make(map[[2]string]struct{})
	}
	h.keys[[2]string{queue, key}] = struct{}{}
}

// has reports whether a batch of queue and key was handed off and not found gone since.
func (h *handedKeys) has(queue, key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.keys[[2]string{queue, key}]
	return ok
}

// forget drops queue and key: the outbox holds none of its rows any more.
func (h *handedKeys) forget(queue, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.keys, [2]string{queue, key})
}

// followsOutbox returns a non-nil error (wrapping core.ErrBackendUnavailable, so the batch is
// handed off without a backend write) when keyed batch b must follow earlier batches of its
// key that this node handed to the outbox and the outbox still holds. A failed question
// counts as "still holds": order first; the handoff then meets the same database.
func (n *Node) followsOutbox(ctx context.Context, b core.OutgoingBatch) error {
	if b.Key == "" || !n.handed.has(b.Queue, b.Key) {
		return nil
	}
	kh, ok := n.opts.Handoff.(core.KeyHolder)
	if !ok {
		return nil
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.ClaimTimeout)
	defer cancel()
	var held bool
	err := safeCall("outbox HoldsKey", func() error {
		var err error
		held, err = kh.HoldsKey(qctx, b.Queue, b.Key)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w: not written: asking the outbox whether it still holds earlier batches of ordering key %q failed (%v), so this one follows them there to keep the key's order", core.ErrBackendUnavailable, b.Key, err)
	case held:
		return fmt.Errorf("%w: not written: the outbox still holds earlier batches of ordering key %q that this node handed off, so this one follows them there to keep the key's order", core.ErrBackendUnavailable, b.Key)
	}
	n.handed.forget(b.Queue, b.Key)
	return nil
}
