package txmq

import (
	"context"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// The errors apps test for with errors.Is. They are core's sentinels (adapters wrap the same
// values), so either name matches.
var (
	// ErrBackendUnavailable: the backend could not be reached or did not answer in time; the
	// call may be retried.
	ErrBackendUnavailable = core.ErrBackendUnavailable
	// ErrRejected: the backend refused a batch permanently (too large, invalid); retrying the
	// same batch cannot succeed.
	ErrRejected = core.ErrRejected
	// ErrLeaseLost: a claim's lease ended or was taken over; a listener's ctx is cancelled with
	// it as cause.
	ErrLeaseLost = core.ErrLeaseLost
	// ErrClosed: the node or backend is closed.
	ErrClosed = core.ErrClosed
	// ErrInvalidConfig: a setting, option or declaration is invalid; the error names it.
	ErrInvalidConfig = core.ErrInvalidConfig
	// ErrNotDeclared: the queue is not declared in the node's registry.
	ErrNotDeclared = core.ErrNotDeclared
	// ErrInvalidPayload: a message does not survive a JSON round trip, or is over its size limit.
	ErrInvalidPayload = core.ErrInvalidPayload
	// ErrNoTransaction: a Require queue was published to outside a transaction.
	ErrNoTransaction = core.ErrNoTransaction
	// ErrUndecodable: a stored batch cannot be decoded.
	ErrUndecodable = core.ErrUndecodable
	// ErrAlreadyDeadLettered: the dead-letter store already holds the batch.
	ErrAlreadyDeadLettered = core.ErrAlreadyDeadLettered
	// ErrWorkerLost: a batch came back past its budget because its runs never settled.
	ErrWorkerLost = core.ErrWorkerLost
	// ErrRunTimeout: a run took longer than its queue's RunTimeout; the listener's ctx is
	// cancelled with it as cause, and the failed run's error wraps it.
	ErrRunTimeout = core.ErrRunTimeout
	// ErrStillStored: a dead-letter replay found the original batch still stored (its drop
	// did not land); replay again once it is gone.
	ErrStillStored = core.ErrStillStored
	// ErrNoDatabase: a transactional call (App.RunInTx, WithTx, WithSQLTx) on an app opened
	// without a database; it names TXMQ_DATABASE_URL.
	ErrNoDatabase = outbox.ErrNoDatabase
)

// The reasons a batch is dropped, as logged, counted (Stats.Dropped, Hooks.Dropped) and stored
// with its dead letter.
const (
	// ReasonDeliveryExhausted: the listener failed MaxAttempts runs.
	ReasonDeliveryExhausted = core.ReasonDeliveryExhausted
	// ReasonWorkerLost: the batch's runs never settled (its nodes kept dying) until its budget
	// was spent.
	ReasonWorkerLost = core.ReasonWorkerLost
	// ReasonUndecodable: the batch could not be decoded.
	ReasonUndecodable = core.ReasonUndecodable
	// ReasonOutboxHandoffFailed: a flush the backend refused could not be handed to the outbox
	// either.
	ReasonOutboxHandoffFailed = core.ReasonOutboxHandoffFailed
	// ReasonNoOutbox: a flush the backend refused, on a node without an outbox (NodeOptions.Handoff).
	ReasonNoOutbox = core.ReasonNoOutbox
	// ReasonDeadLetterFailed: the dead-letter store refused the batch (it was logged instead).
	ReasonDeadLetterFailed = core.ReasonDeadLetterFailed
	// ReasonAbandoned: the backend gave up on the batch (see the adapter's doc).
	ReasonAbandoned = core.ReasonAbandoned
	// ReasonRejected: the backend refused the batch permanently (ErrRejected).
	ReasonRejected = core.ReasonRejected
	// ReasonPublishExhausted: an outbox row kept failing to publish until the outbox's budget
	// was spent.
	ReasonPublishExhausted = core.ReasonPublishExhausted
	// ReasonPermanent: the listener returned a Permanent error; the batch was dead-lettered
	// on that run.
	ReasonPermanent = core.ReasonPermanent
)

// LeaseMargin returns the fencing margin of a lease: max(lease/10, 1s), at most lease/4. A node
// treats a claim as lost once it has not confirmed an extension by LeaseUntil - LeaseMargin.
func LeaseMargin(lease time.Duration) time.Duration { return core.LeaseMargin(lease) }

// DeadLetter is a dropped batch as a dead-letter store keeps it.
type DeadLetter = core.DeadLetter

// Backend is what a node publishes to and fetches from; apps get one from OpenBackend or an
// adapter's constructor and pass it to NewNode. Adapter authors: see package core.
type Backend = core.Backend

// OpenBackend opens the backend named by rawURL, for example memory://, postgres://...,
// redis://..., sqs://..., nats://.... memory:// is always registered; every other scheme is
// registered by importing its adapter (_ "github.com/txmq/txmq/adapters/redis", or
// adapters/all for every backend), and the error for a scheme that is not names the import
// to add. Errors never include the URL's secrets.
func OpenBackend(ctx context.Context, rawURL string) (Backend, error) {
	return core.OpenBackend(ctx, rawURL)
}
