package core

// ReasonRejected: the backend refused a batch permanently (too large, invalid: an error wrapping
// ErrRejected). A refused buffered flush is dead-lettered (or dropped) at once rather than
// handed to the outbox, and an outbox row the backend refuses is dead-lettered by the outbox.
const ReasonRejected = "rejected"

// ReasonPublishExhausted: an outbox row kept failing to publish (with errors other than the
// backend being unavailable) until the outbox's own budget (outbox Options.MaxAttempts) was
// spent; the outbox dead-letters it.
const ReasonPublishExhausted = "publish_exhausted"

// SizeLimiter is implemented by adapters whose backend cannot store an encoded batch over a
// certain size whole (and does not split or chunk it). Nodes read it at every publish call, so
// an adapter may learn its limit from the server after opening.
type SizeLimiter interface {
	// MaxBatchBytes returns the largest encoded batch the backend stores, in bytes; 0 means no
	// limit of the adapter's own.
	MaxBatchBytes() int
}
