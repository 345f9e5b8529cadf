package engine

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// Routing is a queue's Transactional setting as the engine reads it: how a publish relates
// to the transaction in its ctx (see Engine.Publish).
type Routing int

// The routings; their values are txmq.Transactional's.
const (
	// Require: staged in the transaction; an error outside one.
	Require Routing = 1
	// Try: staged in the transaction; buffered outside one.
	Try Routing = 2
	// Never: buffered after the commit; buffered at once outside a transaction.
	Never Routing = 3
)

// Spec is the engine's untyped view of a declared queue: its name and settings, defaults
// applied. The app API (txmq.Queue[T]) makes one per declaration and never changes it; the
// engine compares specs by pointer (a queue declared in another registry is another spec).
type Spec struct {
	// Name is the queue name.
	Name string
	// Declared is the registry the queue is declared in: an engine publishes only the
	// queues of its own (Options.Specs).
	Declared Specs
	// Routing is the queue's Transactional setting.
	Routing Routing
	// Exclusive: at most one batch in flight cluster-wide (enforced by the backend).
	Exclusive bool
	// Ordered: publishes carry a key, and a batch holds one key in publish order.
	Ordered bool
	// Prioritized: publishes carry a priority (core.Pending.Priority), and each batch a lead
	// of its priority times PriorityAging (core.OutgoingBatch.Lead) that the backend
	// (core.Prioritizer) sorts it by.
	Prioritized bool
	// PriorityAging is a prioritized queue's aging step W (defaulted; 0 when not prioritized).
	PriorityAging time.Duration
	// DefaultPriority is the priority of a publish that sets none (the app API applies it).
	DefaultPriority int
	// Fair: publishes carry a fairness key (core.Pending.FairKey), and the backend
	// (core.FairSharer) hands out the queue's ready batches round-robin across the keys.
	Fair bool
	// ClusterLimit: at most this many batches in flight cluster-wide (enforced by the
	// backend, core.ClusterLimiter); 0: no limit. Exclusive is the limit 1, kept apart.
	ClusterLimit int
	// KeyLimit: at most this many batches of each fairness key in flight cluster-wide (a
	// Fair queue; enforced by the backend, core.ClusterLimiter); 0: no limit per key.
	KeyLimit int
	// Cap returns the per-node cap on running batches, core.Unlimited for none; nil means
	// none. It is re-read at every check and must not panic (the app's func is guarded by
	// the caller).
	Cap func() int
	// MaxBatch is the soft batch size target; MaxAttempts the retry budget (runs).
	MaxBatch, MaxAttempts int
	// MaxMessageBytes and MaxBatchBytes are the queue's size settings (0: the engine's,
	// negative: no library limit).
	MaxMessageBytes, MaxBatchBytes int
	// IDWindow is how long caller ids deduplicate (0: they do not).
	IDWindow time.Duration
	// Unique is the queue's unique mode and window (Mode 0: not unique); each message with a
	// unique key (core.Message.Unique) is cut into a batch of its own carrying it
	// (core.OutgoingBatch.Unique), and the backend (core.UniqueKeeper) checks it.
	Unique core.Unique
	// Dedup maps a flush's messages to the messages to store; nil if unset.
	Dedup func([]core.Message) ([]core.Message, error)
	// Rate is the queue's rate limit (zero: none), Burst defaulted.
	Rate core.RateLimit
	// RunTimeout bounds a run: its listener's ctx is cancelled with core.ErrRunTimeout after
	// it, and a run still going RunGrace later is declared failed (timeouts.go). 0: none.
	RunTimeout, RunGrace time.Duration
	// Backoff is the queue's retry delay after a failed run (1-based); nil: the engine's
	// Options.Backoff. It must not panic (a panic is logged and DefaultBackoff used).
	Backoff func(run int) time.Duration
	// ClassifyError, if set, turns a failed run's error into the one the policy acts on
	// (QueueConfig.ClassifyError); see runner.classify.
	ClassifyError func(err error, run int) error
	// MaxSnoozes bounds a message's snoozes (core.Results.Snooze); 0: core.DefaultMaxSnoozes.
	MaxSnoozes int
}

// limit evaluates the cap now; core.Unlimited when there is none.
func (s *Spec) limit() int {
	if s.Cap == nil {
		return core.Unlimited
	}
	return s.Cap()
}

// Listener is a registered listener, untyped: the queue's spec and a func that decodes a
// claimed body into a Batch bound to the typed listener and OnError.
type Listener struct {
	// Spec is the queue listened to.
	Spec *Spec
	// Decode decodes a stored batch body; an error wraps core.ErrUndecodable. id is the id the
	// backend stored the batch under (core.Claim.ID), a hint: a decoded id equal to it is kept
	// without a copy. It may be empty or differ; the decoded id is the body's.
	Decode func(body []byte, id string) (*Batch, error)

	history runHistory // runs per minute, for RunHistory
}

// Batch is a claimed batch after decoding, with its typed calls bound.
type Batch struct {
	// Header is the batch's header, in the decoded envelope (not a copy): its id, attempt
	// count, due time, trace contexts and message ids.
	*envelope.Header
	// Count is the number of messages.
	Count int
	// Calls are the typed listener and OnError, bound to the messages.
	Calls Calls
	// HasOnError: the queue has an OnError (Calls.OnError is a no-op otherwise).
	HasOnError bool
}

// Calls is a decoded batch's typed calls.
type Calls interface {
	// Run runs the listener on the batch's messages.
	Run(ctx context.Context) error
	// OnError calls the queue's OnError with the messages, the cause and the runs spent.
	OnError(err error, attempts int) error
}
