package core

import "fmt"

// Cluster-wide concurrency limits: a queue with a limit (txmq.QueueConfig.ClusterLimit, sent as
// QueueSlots.Limit) has at most that many batches in flight across every node sharing the
// backend, as an Exclusive queue has at most one; a fair queue with a key limit
// (txmq.QueueConfig.KeyLimit, sent as QueueSlots.KeyLimit) has at most that many batches of
// each fairness key (OutgoingBatch.FairKey, the empty key included) in flight. A batch counts
// from the claim that hands it out until it is settled (Ack, Retry, Drop, Split) or its lease
// ends without an extension: an expired lease no longer counts, so a node that crashed,
// stopped extending or paused gives its slots back after its lease, as it gives back an
// Exclusive queue. Both limits hold together with the node's own Free (a node never asks for
// more than it can start, nor for more than Limit) and with per-key order (KeyOrderer).

// ClusterLimiter is implemented by adapters that enforce QueueSlots.Limit and
// QueueSlots.KeyLimit with their own mechanism, across every node sharing the backend and
// every concurrent Fetch (see the comment at the top of this file): Fetch never hands out a
// batch of a limited queue that would make its unexpired claims more than Limit, or those of
// its fairness key more than KeyLimit. A claim given back (settled) or whose lease ran out is
// released at once. Nodes refuse a queue with a limit on a backend without this capability (see
// LimitsClaims). Called through LimitsClaims by txmq.NewNode, once. The parity group "limits"
// checks it.
type ClusterLimiter interface {
	// LimitsClaims returns nil when the backend, as opened, enforces QueueSlots.Limit and
	// QueueSlots.KeyLimit, or an error saying why not.
	LimitsClaims() error
}

// LimitsClaims reports whether b enforces cluster-wide concurrency limits: nil when it (or
// the backend it wraps, looking through wrappers with an Unwrap() Backend method, as
// SharesFairly does) implements ClusterLimiter and its LimitsClaims returns nil, else an
// error wrapping ErrInvalidConfig that names the adapter's type.
func LimitsClaims(b Backend) error {
	outer := b
	for range 16 {
		if l, ok := b.(ClusterLimiter); ok {
			if err := l.LimitsClaims(); err != nil {
				return fmt.Errorf("%w: backend %T does not enforce cluster-wide concurrency limits: %w", ErrInvalidConfig, b, err)
			}
			return nil
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return fmt.Errorf("%w: backend %T (adapter %T) does not enforce cluster-wide concurrency limits (core.ClusterLimiter)", ErrInvalidConfig, outer, b)
}
