package core

// Helpers: find a backend's optional capabilities (capabilities.go), looking through wrappers
// that expose the backend they wrap with an Unwrap() Backend method.

import (
	"context"
	"fmt"
	"time"
)

// DepthsSettle returns the DepthsSettle of b (0 when its Depths are exact), looking through
// wrappers that expose the backend they wrap with an Unwrap() Backend method.
func DepthsSettle(b Backend) time.Duration {
	for range 16 { // wrappers nest a few levels at most; a cycle must not hang
		if a, ok := b.(ApproximateDepths); ok {
			return max(a.DepthsSettle(), 0)
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			return 0
		}
		b = u.Unwrap()
	}
	return 0
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

// DedupsIDs reports how b deduplicates caller ids, looking through wrappers with an Unwrap()
// Backend method as OrdersKeys does; an error wrapping ErrInvalidConfig names the adapter
// when it cannot.
func DedupsIDs(b Backend) (DedupSupport, error) {
	outer := b
	for range 16 {
		if d, ok := b.(IDDeduper); ok {
			s, err := d.DedupIDs()
			if err != nil {
				return DedupSupport{}, fmt.Errorf("%w: backend %T does not deduplicate message ids: %w", ErrInvalidConfig, b, err)
			}
			return s, nil
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return DedupSupport{}, fmt.Errorf("%w: backend %T (adapter %T) does not deduplicate message ids (core.IDDeduper)", ErrInvalidConfig, outer, b)
}

// ListQueues returns the queues b knows (QueueLister), looking through wrappers with an
// Unwrap() Backend method as KeyHolderOf does. A backend that implements no QueueLister
// returns an error wrapping ErrListUnsupported that names its type.
func ListQueues(ctx context.Context, b Backend) ([]string, error) {
	outer := b
	for range 16 {
		if l, ok := b.(QueueLister); ok {
			return l.Queues(ctx)
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return nil, fmt.Errorf("%w: backend %T", ErrListUnsupported, outer)
}
