package core

import (
	"context"
	"fmt"
)

// KeyOrderer is implemented by adapters that enforce per-key order on the batches of an
// ordered queue (a batch whose OutgoingBatch.Key is not empty). An adapter that implements it
// promises, across every node sharing the backend:
//
//   - Batches of one queue and key are claimable one at a time, in the order they were
//     published (their Publish calls returned), each only once every earlier batch of its key
//     was acked or dropped: at most one batch per key is in flight cluster-wide.
//   - Head of line: a batch given back with Retry stays the first of its key (the later ones
//     wait through its retries and backoff) until it is acked or dropped.
//   - A lost lease makes the same batch claimable again before any later batch of its key.
//   - A delayed batch holds back the later batches of its key until it is due and done.
//   - Different keys, and the unkeyed batches of the queue, are not held up by one another;
//     Exclusive and FetchRequest's per-queue Free keep their meaning, counted in batches.
//
// The parity group "ordering" checks each. Nodes refuse an ordered queue (QueueConfig.Ordered)
// on a backend without this capability (see OrdersKeys).
type KeyOrderer interface {
	// OrdersKeys returns nil when the backend, as opened, enforces per-key order, or an error
	// saying why not (for example a server too old for the adapter's mechanism).
	OrdersKeys() error
}

// OrdersKeys reports whether b enforces per-key order: nil when it (or the backend it wraps,
// looking through wrappers with an Unwrap() Backend method) implements KeyOrderer and its
// OrdersKeys returns nil, else an error wrapping ErrInvalidConfig that names the adapter's type.
// A wrapper that changes how batches are stored or claimed (the drain wrapper, which reads two
// backends) must implement KeyOrderer itself rather than expose Unwrap, or it is looked through.
func OrdersKeys(b Backend) error {
	outer := b
	for range 16 { // wrappers nest a few levels at most; a cycle must not hang
		if o, ok := b.(KeyOrderer); ok {
			if err := o.OrdersKeys(); err != nil {
				return fmt.Errorf("%w: backend %T does not enforce per-key order: %w", ErrInvalidConfig, b, err)
			}
			return nil
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return fmt.Errorf("%w: backend %T (adapter %T) does not implement per-key ordering (core.KeyOrderer)", ErrInvalidConfig, outer, b)
}

// MaxKeyBytes is the longest ordering key (OutgoingBatch.Key) a publish accepts.
const MaxKeyBytes = 128

// ValidKey reports whether key can be an ordering key: 1 to MaxKeyBytes bytes of printable
// ASCII without spaces (0x21 to 0x7e), the set SQS allows in a MessageGroupId, so that a key
// means the same on every backend. Apps with longer or other keys hash them.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyBytes {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// KeyHolder is implemented by adapters that can tell whether they hold any batch of one key
// of an ordered queue: ready, delayed, waiting behind the key's head, or in flight. The drain
// wrapper asks it of an old backend, to publish a key's new batches behind the ones the old
// backend still holds (see package drain).
type KeyHolder interface {
	// HoldsKey reports whether the backend holds any batch of queue with ordering key key.
	// A backend that cannot answer returns an error (wrapping ErrBackendUnavailable when it
	// is unreachable).
	HoldsKey(ctx context.Context, queue, key string) (bool, error)
}

// KeyHolderOf returns b as a KeyHolder, looking through wrappers with an Unwrap() Backend
// method as OrdersKeys does, or nil when neither b nor a backend it wraps implements it.
func KeyHolderOf(b Backend) KeyHolder {
	for range 16 {
		if h, ok := b.(KeyHolder); ok {
			return h
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return nil
		}
		b = u.Unwrap()
	}
	return nil
}

// KeyLister is implemented by a Handoff (the outbox) that can list the ordering keys it holds
// batches of. A node asks it once, before it writes its first batch of an ordered key, so that
// the keys an earlier node of the app left in the outbox (handed off by a node that closed
// during an outage, or committed in transactions whose publish failed) are followed, as the
// keys it hands off itself are (see KeyHolder).
type KeyLister interface {
	// HeldKeys returns, per queue of queues, the ordering keys the outbox holds batches of.
	HeldKeys(ctx context.Context, queues []string) (map[string][]string, error)
}
