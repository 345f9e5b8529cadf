package core

import "fmt"

// Fair share by key: a fair queue (txmq.QueueConfig.Fair) gives each batch a fairness key
// (OutgoingBatch.FairKey: a tenant, an account; the empty string is a key like any other) and
// its backend hands out ready batches round-robin across the keys that have ready batches:
// one batch of the next key in turn per claim, so a key with a backlog of any size and a key
// with one ready batch both progress. A key that gets a ready batch joins the end of the turn;
// a key whose last ready batch was claimed leaves it. A ready batch is therefore claimed
// within K claims of the queue's ready batches, K being the number of keys with ready batches
// (one per other key ahead of it in turn). Within a key, batches go as on any queue: by
// priority with aging on a prioritized queue (Prioritizer: fairness comes first, a key's
// priority never lets it skip another key's turn), in any order otherwise; on an ordered
// queue only a key's head is ready (KeyOrderer), so ordering comes before fairness.

// FairSharer is implemented by adapters that hand out the ready batches of a queue
// round-robin across their OutgoingBatch.FairKey (see the comment at the top of this file), across
// every node sharing the backend, and that keep a batch's FairKey through its retries (Retry),
// lease expiries and splits. Nodes refuse a fair queue on a backend without this capability
// (see SharesFairly). Called through SharesFairly by txmq.NewNode, once.
type FairSharer interface {
	// SharesFairly returns nil when the backend, as opened, honours OutgoingBatch.FairKey,
	// or an error saying why not.
	SharesFairly() error
}

// SharesFairly reports whether b shares a fair queue's claims across its keys: nil when it (or
// the backend it wraps, looking through wrappers with an Unwrap() Backend method, as
// Prioritizes does) implements FairSharer and its SharesFairly returns nil, else an error
// wrapping ErrInvalidConfig that names the adapter's type.
func SharesFairly(b Backend) error {
	outer := b
	for range 16 {
		if f, ok := b.(FairSharer); ok {
			if err := f.SharesFairly(); err != nil {
				return fmt.Errorf("%w: backend %T does not share claims fairly by key: %w", ErrInvalidConfig, b, err)
			}
			return nil
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return fmt.Errorf("%w: backend %T (adapter %T) does not implement fair share by key (core.FairSharer)", ErrInvalidConfig, outer, b)
}

// FairPrioritizer is implemented by FairSharer adapters that also rank a fair queue's
// batches by priority within each key (a queue both Fair and Prioritized: due time minus
// OutgoingBatch.Lead, as Prioritizer says, among the batches of the key whose turn it is).
// Nodes refuse a queue that is both on a backend without it (see SharesFairlyByPriority).
// Called through SharesFairlyByPriority by txmq.NewNode, once.
type FairPrioritizer interface {
	// SharesFairlyByPriority returns nil when the backend, as opened, ranks a fair queue's
	// batches by priority within each key, or an error saying why not.
	SharesFairlyByPriority() error
}

// SharesFairlyByPriority reports whether b ranks a fair, prioritized queue's batches by
// priority within each key: nil when it (or the backend it wraps, through Unwrap() Backend)
// implements FairPrioritizer and its SharesFairlyByPriority returns nil, else an error
// wrapping ErrInvalidConfig that names the adapter's type.
func SharesFairlyByPriority(b Backend) error {
	outer := b
	for range 16 {
		if f, ok := b.(FairPrioritizer); ok {
			if err := f.SharesFairlyByPriority(); err != nil {
				return fmt.Errorf("%w: backend %T does not rank a fair queue's batches by priority: %w", ErrInvalidConfig, b, err)
			}
			return nil
		}
		u, ok := b.(interface{ Unwrap() Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return fmt.Errorf("%w: backend %T (adapter %T) does not rank a fair queue's batches by priority (core.FairPrioritizer)", ErrInvalidConfig, outer, b)
}
