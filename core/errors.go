package core

import "errors"

// Sentinel errors. Every error txmq returns wraps one of these where it applies, so callers can
// test with errors.Is; the wrapping message names the queue or setting and what to do.
var (
	// ErrBackendUnavailable means the backend could not be reached or refused work for a reason
	// that should pass (connection refused, timeout, failover). Adapters wrap their SDK errors in
	// it; the outbox sweep stops early when it sees it anywhere in an error chain.
	ErrBackendUnavailable = errors.New("txmq: backend unavailable")

	// ErrRejected means the backend (or the engine, before it) refused a batch or a message
	// permanently: too large, or invalid in a way that waiting does not fix. It never wraps
	// ErrBackendUnavailable: a refused batch is dead-lettered (reason "rejected"), never retried
	// forever, and never stops an outbox sweep. Adapters classify such refusals into it in their
	// one error-classification place; a publish over a size limit fails with it at the call site.
	ErrRejected = errors.New("txmq: rejected by the backend")

	// ErrLeaseLost means a settle or lease extension came from a node that no longer holds the
	// batch's lease (it expired and the batch may already run elsewhere).
	ErrLeaseLost = errors.New("txmq: lease lost")

	// ErrClosed means the node (or a backend) has been closed; nothing more is accepted.
	ErrClosed = errors.New("txmq: node closed")

	// ErrInvalidConfig means a queue declaration, listener registration or option is invalid.
	ErrInvalidConfig = errors.New("txmq: invalid configuration")

	// ErrNotDeclared means a queue name is not declared in the node's registry.
	ErrNotDeclared = errors.New("txmq: queue not declared")

	// ErrInvalidPayload means a message does not survive a JSON round trip.
	ErrInvalidPayload = errors.New("txmq: invalid payload")

	// ErrNoTransaction means a queue declared Transactional: Require was published outside an
	// app transaction.
	ErrNoTransaction = errors.New("txmq: no transaction")

	// ErrUndecodable means a stored batch could not be decoded; such a batch is dead-lettered
	// at once and never retried.
	ErrUndecodable = errors.New("txmq: undecodable batch")

	// ErrAlreadyDeadLettered is what a DeadLetterSink returns (wrapped or as is) for a batch
	// it already holds as a dead letter (same queue and batch id, not replayed since): it keeps
	// the first reason, error and attempts, and the engine then drops the batch without calling
	// OnError again, so the terminal path runs once per batch id across nodes.
	ErrAlreadyDeadLettered = errors.New("txmq: batch already dead-lettered")

	// ErrWorkerLost is the error given to OnError and the dead-letter sink for a batch whose
	// runs kept ending without a settle (the node holding it died each time) until the retry
	// budget was spent.
	ErrWorkerLost = errors.New("txmq: batch redelivered after lost leases until its budget was spent")

	// ErrRunTimeout is the cause of a listener's context cancelled by its queue's run timeout,
	// and what the failed run's error wraps (retry, dead letter, OnError): the run took longer
	// than QueueConfig.RunTimeout.
	ErrRunTimeout = errors.New("txmq: run timed out")

	// ErrStillStored is what Publish returns (wrapped) for a deliberate re-publish of a batch
	// (OutgoingBatch.PublishID set: a dead-letter replay) whose id a backend that keeps one
	// batch per id still stores with another body: the earlier batch was dead-lettered but its
	// Drop did not land. Nothing was stored. The caller removes the earlier batch through
	// BatchEditor, which refuses one in flight (its holder may still settle it), and
	// publishes again: outbox.Store.Replay does. A backend that stores each publish apart
	// stores the re-publish and never returns it.
	ErrStillStored = errors.New("txmq: the batch id is still stored in the backend")
)
