// Package core is txmq's public API and engine: the queue registry, the publish pipeline, the
// polling driver, the delivery engine and the one retry/drop/on-error/dead-letter policy that
// every backend shares.
//
// # Declaring, listening, publishing
//
// A queue is declared once, with a closed and validated config, usually in a package-level var:
//
//	var Emails = core.MustDeclare[Email](nil, "emails", core.QueueConfig[Email]{Transactional: core.Try})
//
// A Node publishes and consumes on one Backend (memory, sqljobs, redis, sqs, nats; see
// OpenBackend). Register one listener per queue per node, then Start:
//
//	node, _ := core.NewNode(&core.NodeOptions{Backend: backend})
//	_ = Emails.Listen(node, func(ctx context.Context, msgs []Email) error { ... })
//	_ = node.Start(ctx)
//	_ = Emails.Publish(ctx, node, Email{To: "a@example.com"})
//
// # Routing
//
// Where a publish goes depends on the queue's Transactional setting and on whether ctx carries an
// app transaction (ContextWithTx, done for you by the outbox package):
//
//	mode     inside the app's transaction              outside
//	Require  outbox row in the same transaction        error (ErrNoTransaction)
//	Try      outbox row in the same transaction        immediate
//	Never    held until commit, then immediate         immediate
//
// Nothing is published if the transaction rolls back. Immediate means the node's coalescing
// buffer. A queue's buffer is flushed when the first of these comes: it holds MaxBatchMessages,
// no message was added for FlushWindow (20 ms), or FlushCap (100 ms) passed since its first
// message. The cap is measured from the first message, so a steady stream still leaves every
// 100 ms: a plain publish waits at most about FlushCap plus one FlushTick (10 ms) before its
// write starts, at any rate. A publish never waits for the backend. A
// flush the backend refuses is handed to the outbox; only if that fails too is the batch
// dropped, logged and counted (reason outbox_handoff_failed).
//
// # Delivery and the failure policy
//
// Delivery is at-least-once and unordered; listeners get a slice of messages and must be
// idempotent. Each node runs one polling driver that asks the backend's Fetch for exactly the
// free slots of the queues it listens to. A running batch holds a lease that the node extends.
//
// A run is counted when a batch is handed out: the budget (MaxAttempts, default 5) is the most
// times a listener runs for one batch, whether a run fails or its node dies. A failed run is
// retried after Backoff while the budget lasts; then the batch is dropped: logged, counted
// (batches dropped, reason delivery_exhausted), written to the dead-letter sink if there is
// one, and given to OnError once. A batch whose runs never settle (its nodes keep dying) is
// dropped the same way with reason worker_lost when it comes back past its budget, without
// running again. A batch that cannot be decoded is dropped at once (reason undecodable).
// Panics in listeners are failures; panics and errors in OnError, the sink and metrics hooks
// are logged and swallowed and never cause a redelivery.
//
// # Delays and clocks
//
// After(d) and At(t) are never delivered early, and a delay is judged on one clock at a time.
// The publishing node turns the due time into a delay with its own clock (NodeOptions.Clock)
// when it flushes (At(t) means t by that clock); the batch carries it as OutgoingBatch.Delay,
// and the backend adds it to its own clock (Postgres clock_timestamp(), Redis TIME, SQS
// DelaySeconds and message timestamps, the NATS server's clock for schedules). Outbox rows
// store their due time on the app database's clock (its clock at the insert plus the delay)
// and the relay and sweep pass on what is left. No absolute time crosses from one clock to
// another, so clock skew between the app, its database and the backend cannot make a delay
// early or late; txmq documents and tests a skew of up to MaxClockSkew (1 minute).
//
// Core also guards against an adapter that breaks this: the envelope records the due time on
// the publisher's clock (Envelope.Due), and a batch that arrives more than twice MaxClockSkew
// before it by the consuming node's clock (the two nodes' clocks may be that far apart, so
// closer than that the guard cannot tell early from skew and stays silent) is given back
// with Retry for what is left plus that allowance (late rather than early), with its attempt
// count unchanged: it is not a run, no listener, OnError or dead letter is involved, and
// Stats.EarlyArrivals counts it. With an adapter that retries in place (keeps the old body
// and its delivery count) the give-back would count as a delivery; every adapter in this
// module rewrites.
//
// # Writing an adapter
//
// Implement Backend (backend.go documents every rule), register a URL scheme with
// RegisterBackend, and run the parity suite (package parity) against a real server.
package core
