package core

// This file is what every adapter implements: Backend, the types its methods take and return,
// and the drop reasons. The sentinel errors an adapter wraps are in errors.go, the optional
// capabilities in capabilities.go, the contracts of the stores beside a backend (outbox,
// dead letters, ledger, limiter) in stores.go; the other files are helpers.

import (
	"context"
	"time"
)

// Backend is the contract an adapter implements. Backends move opaque, already encoded batches:
// they never look inside Body. Everything that must mean the same on every backend (attempt
// counting, retry budget, backoff, dead letters, OnError, JSON) lives in the engine (package
// internal/engine behind txmq; the retry and dead-letter policy is in its worker.go), never
// in an adapter; an adapter only stores, claims, leases and settles batches.
//
// Rules every adapter follows (the parity suite checks each):
//
//   - Errors caused by the backend being unreachable or overloaded wrap ErrBackendUnavailable;
//     classify SDK errors in one place per adapter. A permanent refusal of a batch (too large,
//     invalid) wraps ErrRejected and never ErrBackendUnavailable, even when the server shows it
//     by closing the connection: the engine dead-letters it rather than retrying it forever. A
//     backend with a size limit it cannot work around (by splitting or chunking) implements
//     SizeLimiter.
//   - Publish stores the batch durably (as durable as the backend is) before returning, and never
//     makes it claimable before its delay (OutgoingBatch.DelayFrom) has passed on the backend's
//     own clock, counted from the publish: the server's now (Postgres now(), Redis TIME, SQS
//     DelaySeconds, a NATS schedule in server time) plus the delay, never the publisher's
//     absolute due time, which is on another clock. This holds for delays beyond the backend's
//     native cap too.
//   - Fetch claims at most Free batches for each requested queue and at most Max in all, only
//     due batches, and only for the queues in the request. A node sends a normalised request
//     (see FetchRequest.Normalize: every Free concrete, between 1 and Max, an Exclusive queue's
//     1); an adapter's Fetch calls req.Normalize() first (free for a normal request) so a
//     hand-built one means the same, and never re-derives limits or defaults of its own.
//   - Exclusive queues have at most one claimed batch in the whole cluster: the adapter enforces
//     it with its own mechanism, across every node sharing the backend, released on Ack, Retry,
//     Drop and on lease expiry. An adapter that implements ClusterLimiter does the same for
//     a queue's QueueSlots.Limit (at most Limit claimed batches) and KeyLimit (per fairness key).
//   - A claim holds a lease until Claim.LeaseUntil. A lease that expires without being settled or
//     extended makes the batch claimable again by any node, with Deliveries incremented. Settling
//     or extending a claim whose lease was lost returns an error wrapping ErrLeaseLost. Settling
//     an already settled claim again is a no-op (nil).
//   - Retry makes the batch claimable again after the delay. The adapter either stores the new
//     body and restarts Deliveries at 0 (a rewrite), or keeps the old body and keeps counting
//     Deliveries (a retry in place). Either way the engine's attempt count stays right, because
//     it counts a run as Envelope.Attempt + Claim.Deliveries.
//   - An adapter that implements IDDeduper publishes a batch with OutgoingBatch.DedupWindow by
//     its rules (ids checked and recorded atomically with the store); one that does not
//     ignores the field (a node refuses such a queue on it).
//   - Fetch honours ctx: cancellation interrupts waiting, but a claim the backend already made
//     is returned (with a nil error) or, when its reply was lost to the cancellation, comes
//     back after its lease; never stranded. The package doc's "Rules every adapter follows"
//     states the rest: concurrency, Body ownership, Close, no retries of its own, cancellation.
type Backend interface {
	// Publish stores one encoded batch.
	Publish(ctx context.Context, b OutgoingBatch) error

	// Fetch claims due batches for the queues in req, at most each queue's free slots. It may
	// block up to req.Wait while nothing is due, returning early when work arrives; it returns
	// an empty slice, not an error, when nothing came.
	Fetch(ctx context.Context, req FetchRequest) ([]*Claim, error)

	// Ack removes a successfully processed batch.
	Ack(ctx context.Context, c *Claim) error

	// Retry releases the claim and makes the batch claimable again after delay. body is the
	// batch re-encoded with its attempt count updated; see the type doc for rewrite vs in place.
	// body is the adapter's for the call only: one that keeps it copies it.
	Retry(ctx context.Context, c *Claim, body []byte, delay time.Duration) error

	// Drop removes a batch that the engine has given up on (after it reached the dead-letter
	// sink, if one is configured). reason is one of the Reason constants, for the adapter's
	// own logs.
	Drop(ctx context.Context, c *Claim, reason string) error

	// Extend pushes the claim's lease to now+lease and updates c.LeaseUntil (a node always
	// passes its lease; LeaseOr gives the default for a hand-made call without one).
	Extend(ctx context.Context, c *Claim, lease time.Duration) error

	// Depths reports how many batches of each named queue are ready, in flight and delayed.
	Depths(ctx context.Context, queues []string) (map[string]Depth, error)

	// Close ends waiting fetches and releases the adapter's resources; later calls fail with
	// an error wrapping ErrClosed, and closing twice returns nil. Batches stay stored (in the
	// memory adapter the store is the client: they go with it).
	Close() error
}

// Unlimited is the Free value of a queue without a concurrency cap, in a hand-built request;
// Normalize turns it into Max, and a node never sends it.
const Unlimited = -1

// OutgoingBatch is one encoded batch on its way into a backend.
type OutgoingBatch struct {
	// ID is the batch id (also inside Body); adapters may use it as a storage key or for dedup.
	ID string
	// Queue is the declared queue name.
	Queue string
	// Body is the encoded envelope; opaque to adapters: they store it and hand it back, and
	// what they need to know about the batch is in this struct's other fields. An adapter that
	// cannot store a Body whole has core/envelope.Split, which cuts the batch into smaller
	// OutgoingBatch values without the adapter reading the envelope. It is the adapter's for
	// the duration of Publish only: the caller may reuse the buffer once Publish returns, so
	// an adapter that keeps the bytes copies them, unless BodyFixed is set.
	Body []byte
	// BodyFixed says that nothing changes Body once it is passed to Publish: an adapter may
	// keep the slice itself instead of a copy (the memory adapter does). The engine sets it
	// on the batches it encodes; a caller that reuses its buffers leaves it false.
	BodyFixed bool
	// Delay is how long after this publish the batch may first be claimed, measured from the
	// moment the backend stores it on the backend's own clock; 0 means now. The engine (and
	// the outbox) always set it, from the publisher's due time and the publisher's own clock
	// at the moment of the publish, so the delay crosses from one clock to the next as a
	// duration and app/backend clock skew cannot make a batch early or late. Adapters read
	// DelayFrom.
	Delay time.Duration
	// NotBefore is the due time on the publisher's clock, for logs and for callers that build
	// batches by hand; zero means now. The engine sets it only together with a positive
	// Delay, which wins. Adapters must not compare it with another clock: use DelayFrom.
	NotBefore time.Time
	// Exclusive reports the queue's Exclusive setting, for adapters that pick storage by it.
	Exclusive bool
	// Messages is the number of messages in the batch, for metrics and logs.
	Messages int
	// Key is the batch's ordering key on an ordered queue (every message of the batch has it),
	// empty on other queues. An adapter that implements KeyOrderer keeps the batches of one
	// queue and key in order (see KeyOrderer); the key is also inside Body (the envelope), so
	// a retry, a replay or a drain keeps it.
	Key string
	// MessageIDs are the ids of the batch's messages, in order, when the engine built it (for
	// the ledger); nil otherwise. Adapters ignore it.
	MessageIDs []string
	// PublishID is the identity of this publish for a backend that drops repeated publishes of one
	// batch (SQS FIFO's deduplication id): empty means ID, so a repeat of the same publish (an
	// outbox sweep running twice) is stored once. A deliberate new publish of a batch whose id
	// was published before (a dead-letter replay) sets its own, so that it is not taken for a
	// repeat and silently dropped. At most 128 printable ASCII bytes. A backend that keeps one
	// batch per id and still stores the id with another body (the original, dead-lettered but
	// not yet dropped) stores nothing and returns an error wrapping ErrStillStored (the caller
	// removes the original through BatchEditor once it is not in flight and publishes again,
	// due now at the back of its ordering key); one that
	// stores each publish apart stores it (the node that dead-lettered the original drops the
	// original again when it comes back and runs the replay: see the envelope's replay
	// generation).
	PublishID string
	// DedupWindow, when positive, asks an adapter that implements IDDeduper to deduplicate the
	// batch's messages by DedupIDs for that long (see IDDeduper); 0 for every other batch.
	DedupWindow time.Duration
	// DedupIDs are the ids of all the batch's messages (caller-supplied, distinct) when
	// DedupWindow is positive; nil otherwise.
	DedupIDs []string
	// Unique is the batch's unique key and mode on a queue with txmq.QueueConfig.Unique (the
	// batch then has one message), zero otherwise; an adapter that implements UniqueKeeper
	// checks and holds it in the Publish that stores the batch (see UniqueMode). It is also
	// inside Body (the envelope), so the outbox's relay and sweep ask for the same check.
	Unique Unique
	// Priority is the batch's priority on a prioritized queue (MinPriority to MaxPriority,
	// higher first), MinPriority otherwise; it is also inside Body (the envelope), so a
	// retry, a replay or a drain keeps it. Adapters may store it for their listings.
	Priority int
	// Lead is how much earlier than its due time the batch sorts among the queue's ready
	// batches: Priority times the queue's aging step (see Prioritizer). An adapter that
	// implements Prioritizer claims by due time minus Lead and keeps the lead through
	// Retry; others ignore it (a node refuses a prioritized queue on them). 0 on every
	// batch of a queue that is not prioritized.
	Lead time.Duration
	// FairKey is the batch's fairness key on a fair queue (every message of the batch has
	// it; empty is a key like any other), empty on other queues. An adapter that implements
	// FairSharer hands out the queue's ready batches round-robin across the keys and keeps
	// the key through Retry; it is also inside Body (the envelope), so a replay or a drain
	// keeps it.
	FairKey string
}

// DelayFrom returns how long the batch must wait before it may be claimed: Delay when it is
// positive; else, for a batch built by hand with only NotBefore, the time from now (the
// caller's clock, which must be the publisher's) to NotBefore; never negative.
func (b OutgoingBatch) DelayFrom(now time.Time) time.Duration {
	if b.Delay > 0 {
		return b.Delay
	}
	if b.NotBefore.IsZero() {
		return 0
	}
	return max(b.NotBefore.Sub(now), 0)
}

// QueueSlots is one queue in a FetchRequest.
type QueueSlots struct {
	// Queue is the declared queue name.
	Queue string
	// Free is how many batches this node can start now for the queue: between 1 and the
	// request's Max (full queues are left out of the request), 1 for an Exclusive queue, Max
	// for a queue without a cap. Hand-built requests may say Unlimited (see Normalize).
	Free int
	// Exclusive asks for cluster-wide mutual exclusion on this queue.
	Exclusive bool
	// Ordered reports the queue's Ordered setting (its batches carry keys), for adapters
	// that store keyed batches apart and must know where to look (SQS's FIFO queue).
	Ordered bool
	// Prioritized reports the queue's Prioritized setting (its batches may carry a Lead),
	// for adapters that claim such a queue another way (see Prioritizer).
	Prioritized bool
	// Fair reports the queue's Fair setting (its batches carry a FairKey), for adapters
	// that claim such a queue another way (see FairSharer).
	Fair bool
	// Limit, when positive, caps the queue's claimed batches across every node sharing the
	// backend (txmq.QueueConfig.ClusterLimit): an adapter that implements ClusterLimiter
	// enforces it with its own mechanism, as it does Exclusive; Free is at most Limit. 0:
	// no limit. Nodes send it only to a ClusterLimiter.
	Limit int
	// KeyLimit, when positive, caps a fair queue's claimed batches of each fairness key
	// (OutgoingBatch.FairKey) across every node (txmq.QueueConfig.KeyLimit); see
	// ClusterLimiter. 0: no limit per key. Only a Fair queue has one, so an adapter that
	// does not implement FairSharer never gets one from a node.
	KeyLimit int
}

// FetchRequest asks an adapter for work.
type FetchRequest struct {
	// Node identifies the claiming node (lease owner), unique per running node.
	Node string
	// Queues lists the queues this node listens to and has free slots for.
	Queues []QueueSlots
	// Lease is how long a claim stays valid unless extended (the node's NodeOptions.Lease;
	// DefaultLease in a hand-built request without one).
	Lease time.Duration
	// Wait is how long Fetch may block when nothing is due; 0 means return at once.
	Wait time.Duration
	// Max caps the total number of claims one Fetch returns, across all its queues (the
	// node's NodeOptions.FetchMax; DefaultFetchMax in a hand-built request without one). An
	// adapter that must fix each queue's number up front splits it with Shares.
	Max int
}

// Claim is one batch handed to a node, holding a lease.
type Claim struct {
	// Queue is the batch's queue.
	Queue string
	// ID is the batch id the adapter stored it under.
	ID string
	// Body is the encoded envelope as stored. It is the caller's once Fetch returns and
	// read-only: the engine never modifies it, so an adapter may hand out a slice it stores without
	// copying it, as long as the adapter never writes to that slice either (a Retry's rewrite
	// stores a new slice).
	Body []byte
	// Deliveries counts how many times the backend handed out this body since it was stored or
	// last rewritten by Retry, this delivery included (1 on the first). Only hand-outs count:
	// a receive the adapter held and gave back, or lost to its own Close, without handing it
	// to a Fetch caller is not a run and must not raise it (the parity group "budget").
	Deliveries int
	// LeaseUntil is when the lease ends unless extended.
	LeaseUntil time.Time
	// Handle is the adapter's own lease token (receipt handle, lock token, row version, ...).
	// The engine never looks inside it.
	Handle any
}

// Depth is the number of batches of one queue in each state.
type Depth struct {
	// Ready batches are due and unclaimed.
	Ready int64
	// InFlight batches are claimed by a node under a lease.
	InFlight int64
	// Delayed batches are waiting for their NotBefore or retry time.
	Delayed int64
	// OldestReady is when the longest-waiting ready batch became claimable (published, due,
	// retried or its lease ran out), on the backend's clock. Optional for adapters: zero when
	// no batch is ready or the backend cannot tell cheaply within its Depths call. It is never
	// set while Ready is 0. Compare depths' counts with Counts, not ==.
	OldestReady time.Time
}

// Counts returns d without OldestReady, for comparing batch counts.
func (d Depth) Counts() Depth { return Depth{Ready: d.Ready, InFlight: d.InFlight, Delayed: d.Delayed} }

// Reasons a batch is dropped; used in metrics labels, logs and the dead-letter store.
const (
	// ReasonDeliveryExhausted: the listener failed on every run of the retry budget.
	ReasonDeliveryExhausted = "delivery_exhausted"
	// ReasonWorkerLost: the batch's runs kept ending without a settle (node died) until the
	// budget was spent.
	ReasonWorkerLost = "worker_lost"
	// ReasonUndecodable: the stored batch could not be decoded.
	ReasonUndecodable = "undecodable"
	// ReasonOutboxHandoffFailed: the backend refused a buffered flush and the outbox insert
	// failed too.
	ReasonOutboxHandoffFailed = "outbox_handoff_failed"
	// ReasonNoOutbox: the backend refused a buffered flush and no outbox is configured.
	ReasonNoOutbox = "no_outbox"
	// ReasonDeadLetterFailed: a terminal batch could not be written to the dead-letter sink.
	ReasonDeadLetterFailed = "dead_letter_failed"
	// ReasonAbandoned: a backend's reaper gave up on a batch of a queue that no node has
	// listened to for a long time (see the adapter's options).
	ReasonAbandoned = "abandoned"
)

// ReasonRejected: the backend refused a batch permanently (too large, invalid: an error wrapping
// ErrRejected). A refused buffered flush is dead-lettered (or dropped) at once rather than
// handed to the outbox, and an outbox row the backend refuses is dead-lettered by the outbox.
const ReasonRejected = "rejected"

// ReasonPublishExhausted: an outbox row kept failing to publish (with errors other than the
// backend being unavailable) until the outbox's own budget (outbox Options.MaxAttempts) was
// spent; the outbox dead-letters it.
const ReasonPublishExhausted = "publish_exhausted"
