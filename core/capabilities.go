package core

// This file holds the optional capabilities: interfaces an adapter implements only when its
// backend can do more than Backend asks. The engine, the drain wrapper and the tools find
// them with a type assertion on the Backend (the helpers in unwrap.go also look through
// wrappers that expose the backend they wrap with an Unwrap() Backend method):
//
//	PollWaitHinter     NewNode, once, when NodeOptions.PollWait is zero
//	SizeLimiter        the node at every publish call (the drain wrapper passes its primary's on)
//	ApproximateDepths  the drain wrapper and `txmq status`, before they trust a zero depth
//	KeyOrderer         NewNode, once; an ordered queue is refused without it
//	KeyHolder          the drain wrapper, before it publishes a keyed batch to the new backend
//	IDDeduper          NewNode, once; then Publish, for a batch with DedupWindow
//	BatchInspector     the Inspector (Get, List, Cancel) when no ledger is configured
//	BatchEditor        Inspector.Cancel when no ledger is configured
//	BatchExpediter     Inspector.RunNow (run delayed or retrying batches now)
//	QueueLister        operator tools (`txmq status`, `txmq ui`, the CLI's unknown-queue check)
//	InProcessFetcher   NewNode, once: the fetch loop yields before each turn (inprocess.go)
//	ClusterLimiter     NewNode, once; a queue with a cluster-wide limit is refused without it
//	                   (clusterlimit.go)
//	PublishGrouper     NewNode, once: how many batches a flush writes at a time
//
// An adapter may also implement a store contract of stores.go: a node whose
// NodeOptions.Limiter is nil uses a backend that is a Limiter.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PollWaitHinter is implemented by adapters whose Fetch wait has a price worth tuning (SQS
// bills every long poll): a node whose NodeOptions.PollWait is zero uses the hint instead of
// the 1 s default. Called by txmq.NewNode, once, when NodeOptions.PollWait is zero.
type PollWaitHinter interface {
	// PollWaitHint returns the Fetch wait the adapter recommends.
	PollWaitHint() time.Duration
}

// PublishGrouper is implemented by adapters that store concurrent Publish calls of plain
// batches together (one statement for many, as the SQL jobs adapter does); plain means no
// Key, no Unique and no DedupWindow, and a body of at most maxBody bytes. A node's flush then
// writes up to size plain batches at a time, rather than its default of 8, so that the
// backend finds company to group; every other batch is still written by at most 8 writers,
// since each of those writes may hold a connection of its own. Called by txmq.NewNode, once,
// on the Backend it is given (wrappers are not looked through: a wrapper that groups says so
// itself).
type PublishGrouper interface {
	// PublishGroup returns the most concurrent plain publishes the backend stores together
	// (8 or less changes nothing) and the largest body it groups.
	PublishGroup() (size, maxBody int)
}

// SizeLimiter is implemented by adapters whose backend cannot store an encoded batch over a
// certain size whole (and does not split or chunk it). Nodes read it at every publish call, so
// an adapter may learn its limit from the server after opening. Called by the node at every
// publish call (limits.go), to cut batches below the limit.
type SizeLimiter interface {
	// MaxBatchBytes returns the largest encoded batch the backend stores, in bytes; 0 means no
	// limit of the adapter's own.
	MaxBatchBytes() int
}

// ApproximateDepths is implemented by adapters whose Depths are approximate counts that may lag
// behind what the backend holds (SQS's ApproximateNumberOfMessages* attributes). Code that
// concludes from Depths that a queue is empty (the drain wrapper, before it stops polling an
// old backend or lets the new backend run an Exclusive queue) trusts zeros from such a backend
// only after reading them continuously for at least DepthsSettle, and for at least one lease
// (visibility timeout), so that a batch in flight that was not counted has either finished or
// become visible again. An adapter without the method reports exact counts. Called through
// DepthsSettle by the drain wrapper (when it opens) and by `txmq status`.
type ApproximateDepths interface {
	// DepthsSettle returns how long Depths may lag behind the backend's state.
	DepthsSettle() time.Duration
}

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
// on a backend without this capability (see OrdersKeys). Called through OrdersKeys by
// txmq.NewNode, once, and by the drain wrapper for the backends it wraps.
type KeyOrderer interface {
	// OrdersKeys returns nil when the backend, as opened, enforces per-key order, or an error
	// saying why not (for example a server too old for the adapter's mechanism).
	OrdersKeys() error
}

// KeyHolder is implemented by adapters that can tell whether they hold any batch of one key
// of an ordered queue: ready, delayed, waiting behind the key's head, or in flight. The drain
// wrapper asks it of an old backend, to publish a key's new batches behind the ones the old
// backend still holds (see package drain). Called through KeyHolderOf by the drain wrapper,
// at each publish of a keyed batch while it drains an old backend.
type KeyHolder interface {
	// HoldsKey reports whether the backend holds any batch of queue with ordering key key.
	// A backend that cannot answer returns an error (wrapping ErrBackendUnavailable when it
	// is unreachable).
	HoldsKey(ctx context.Context, queue, key string) (bool, error)
}

// IDDeduper is implemented by adapters that deduplicate caller-supplied message ids
// (txmq.QueueConfig.IDDedupWindow). A batch asks for it with OutgoingBatch.DedupWindow > 0;
// its DedupIDs are then the ids of all its messages, distinct. The adapter's Publish, in one
// atomic step on the backend:
//
//   - when none of DedupIDs is held for the batch's queue, records each of them for the queue
//     until DedupWindow after the publish (on the backend's clock; a backend whose window is
//     fixed or set elsewhere says so in DedupSupport) and stores the batch;
//   - when some are held, stores nothing and returns a *DuplicateError naming them (it may
//     name only the first it finds, as long as it names at least one): the engine drops
//     those messages and publishes the rest again.
//
// A batch without DedupWindow (generated ids, a dead letter's replay) costs nothing more and
// is never checked. The parity group "identity" checks it. Called through DedupsIDs by
// txmq.NewNode, once (a queue with an IDDedupWindow is refused without it); Publish then
// sees DedupWindow on the batches of such a queue.
type IDDeduper interface {
	// DedupIDs says how the backend, as opened, deduplicates, or returns an error saying why
	// it cannot (for example an SQS standard queue).
	DedupIDs() (DedupSupport, error)
}

// DedupSupport describes an adapter's id deduplication.
type DedupSupport struct {
	// OnePerBatch: the backend deduplicates a stored batch as a whole (NATS's Nats-Msg-Id,
	// SQS FIFO's MessageDeduplicationId), so the engine gives each message with a caller id
	// a batch of its own.
	OnePerBatch bool
	// MaxWindow is the longest window the backend honours; 0: any. A queue asking for more
	// is refused by the node, naming both.
	MaxWindow time.Duration
}

// ErrDuplicate marks a publish refused because message ids of the batch were already published
// to its queue within their window (see IDDeduper). The error is a *DuplicateError naming them.
var ErrDuplicate = errors.New("txmq: message ids already published to the queue within the dedup window")

// DuplicateError is the refusal of a batch whose DedupIDs (some or all) the backend already
// holds for the queue: the backend stored nothing. The engine drops those messages from the
// batch and publishes the rest again, so a retried flush (the same ids) delivers each message
// once.
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

// BatchInspector is an optional adapter interface: an adapter that can enumerate the batches
// it holds lets the engine look messages up by id without a ledger (the memory, sqljobs and
// Redis adapters implement it). Completed batches are gone from a backend, so such a lookup
// knows only messages not yet completed. Called by the Inspector (Get, List, and Cancel to
// find the batch) when no ledger is configured.
type BatchInspector interface {
	// InspectBatches calls fn for each batch of the named queues until fn returns false:
	// every batch stored, those held behind an earlier batch of their ordering key included.
	InspectBatches(ctx context.Context, queues []string, fn func(StoredBatch) bool) error
}

// StoredBatch is one batch an adapter holds, as BatchInspector reports it.
type StoredBatch struct {
	// Queue and ID name the batch.
	Queue, ID string
	// Body is the encoded envelope, read-only.
	Body []byte
	// State is where the batch is.
	State BatchState
	// Due is when a delayed batch becomes due; zero otherwise.
	Due time.Time
	// Deliveries is Claim.Deliveries of the current or last hand-out.
	Deliveries int
	// Since is when the current claim was handed out (BatchInFlight), when known.
	Since time.Time
}

// BatchState is where an adapter holds a stored batch.
type BatchState int

// The states of a stored batch.
const (
	// BatchReady: due and unclaimed.
	BatchReady BatchState = iota + 1
	// BatchDelayed: waiting for its due or retry time (StoredBatch.Due), or held behind an
	// earlier batch of its ordering key (Due its own due time, or zero), as Depths counts it.
	BatchDelayed
	// BatchInFlight: claimed by a node under a lease.
	BatchInFlight
)

// BatchEditor is an optional adapter interface, for cancelling without a ledger: it replaces
// the body of a batch that is not claimed, or removes the batch when body is nil. A batch that
// is in flight or gone is not changed: the error wraps ErrNotCancellable (in flight) or
// ErrMessageNotFound (gone). On an ordered queue (KeyOrderer) any unclaimed batch of a key
// can be edited or removed: removing the key's first batch lets its next one become due, as
// an ack does, and a key with no batch left is no longer held (KeyHolder). Called by
// Inspector.Cancel when no ledger is configured.
type BatchEditor interface {
	// ReplaceBatch replaces or (body nil) removes the unclaimed batch id of queue; body is
	// the adapter's for the call only.
	ReplaceBatch(ctx context.Context, queue, id string, body []byte) error
}

// BatchExpediter is an optional adapter interface: it makes an unclaimed batch that waits for
// its due or retry time due now, as if that time had come, with body as its new body (the
// Inspector's copy with the envelope's due time cleared, which the engine checks on delivery;
// the adapter's for the call only) and its deliveries unchanged.
// A batch held behind an earlier batch of its ordering key gets its own due time set to now
// and still waits for its key. A batch already ready is left as it is (nil). A batch in
// flight is not changed (an error wrapping ErrNotCancellable), nor one that is gone
// (ErrMessageNotFound). Called by Inspector.RunNow.
type BatchExpediter interface {
	// ExpediteBatch makes the unclaimed batch id of queue due now, with body.
	ExpediteBatch(ctx context.Context, queue, id string, body []byte) error
}

// QueueLister is implemented by adapters that can list the queues their backend knows: every
// queue a batch was published to (and, where the backend keeps per-queue storage, whose
// storage still exists), whether or not it holds work now. Names are the queue names the node
// published with, never the backend's own names for them (prefixes, stream or SQS queue
// names).
//
// Who calls it: operator tools, never the engine. `txmq status` and `txmq ui` list the queues
// with ready, in-flight or delayed work that no table of the app database names, and the
// command line refuses a command naming a queue no source knows. It may walk the backend's
// key space or catalogue (Redis SCAN, a stream or queue listing), so it is called once per
// command or page, not per fetch. Use ListQueues, which looks through wrappers.
type QueueLister interface {
	// Queues returns the queues the backend knows, sorted and without duplicates; an empty
	// backend returns none. A backend that cannot be reached returns an error wrapping
	// ErrBackendUnavailable.
	Queues(ctx context.Context) ([]string, error)
}

// ErrListUnsupported is returned by ListQueues for a backend that does not implement
// QueueLister: the caller says the backend cannot list its queues, never "no queues".
var ErrListUnsupported = errors.New("the backend cannot list its queues (no core.QueueLister)")
