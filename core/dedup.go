package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrDuplicate marks a publish refused because message ids of the batch were already published
// to its queue within their window (see IDDeduper). The error is a *DuplicateError naming them.
var ErrDuplicate = errors.New("txmq: message ids already published to the queue within the dedup window")

// DuplicateError is the refusal of a batch whose DedupIDs (some or all) the backend already
// holds for the queue: the backend stored nothing. Core drops those messages from the batch
// and publishes the rest again, so a retried flush (the same ids) delivers each message once.
type DuplicateError struct {
	// Queue is the batch's queue.
	Queue string
	// IDs are the ids of the batch that were already published within the window.
	IDs []string
}

// Error names the queue and the ids (the first few).
func (e *DuplicateError) Error() string {
	ids := e.IDs
	more := ""
	if len(ids) > 5 {
		ids, more = ids[:5], fmt.Sprintf(" and %d more", len(e.IDs)-5)
	}
	return fmt.Sprintf("queue %q: message id(s) %s%s already published within the dedup window", e.Queue, strings.Join(ids, ", "), more)
}

// Unwrap makes errors.Is(err, ErrDuplicate) true.
func (e *DuplicateError) Unwrap() error { return ErrDuplicate }

// IDDeduper is implemented by adapters that deduplicate caller-supplied message ids
// (txmq.QueueConfig.IDDedupWindow). A batch asks for it with OutgoingBatch.DedupWindow > 0;
// its DedupIDs are then the ids of all its messages, distinct. The adapter's Publish, in one
// atomic step on the backend:
//
//   - when none of DedupIDs is held for the batch's queue, records each of them for the queue
//     until DedupWindow after the publish (on the backend's clock; a backend whose window is
//     fixed or set elsewhere says so in DedupSupport) and stores the batch;
//   - when some are held, stores nothing and returns a *DuplicateError naming them (it may
//     name only the first it finds, as long as it names at least one): core drops those
//     messages and publishes the rest again.
//
// A batch without DedupWindow (generated ids, a dead letter's replay) costs nothing more and
// is never checked. The parity group "identity" checks it.
type IDDeduper interface {
	// DedupIDs says how the backend, as opened, deduplicates, or returns an error saying why
	// it cannot (for example an SQS standard queue).
	DedupIDs() (DedupSupport, error)
}

// DedupSupport describes an adapter's id deduplication.
type DedupSupport struct {
	// OnePerBatch: the backend deduplicates a stored batch as a whole (NATS's Nats-Msg-Id,
	// SQS FIFO's MessageDeduplicationId), so core gives each message with a caller id a batch
	// of its own.
	OnePerBatch bool
	// MaxWindow is the longest window the backend honours; 0: any. A queue asking for more
	// is refused by the node, naming both.
	MaxWindow time.Duration
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
