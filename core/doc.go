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
// dropped, logged and counted (reason outbox_handoff_failed). A flush the backend refuses
// permanently (an error wrapping ErrRejected: too large, invalid) is not handed to the outbox,
// where it would be retried forever: it is written to the dead-letter sink, or, without one,
// dropped, logged and counted, with reason rejected.
//
// # Size limits
//
// Each message of a publish call is checked before anything of the call is buffered or staged:
// one message over the limit fails the whole call with an error wrapping ErrRejected (and
// ErrInvalidPayload) that names the queue, the size, the limit and the setting to raise.
// Batches are cut so that their encoded size stays under the batch limit (a batch always holds
// at least one message). The limits are QueueConfig.MaxMessageBytes and MaxBatchBytes when set
// (NoSizeLimit turns the library limit off for a queue), else NodeOptions.MaxMessageBytes and
// MaxBatchBytes (default 1 MiB and 8 MiB), capped by the backend's own limit when its adapter
// implements SizeLimiter: Redis reports the server's proto-max-bulk-len
// (512 MB by default), sqljobs PostgreSQL's 1 GB value limit; SQS (which splits a batch by
// messages, or uses its overflow store) and NATS (which chunks bodies over max_payload) report
// none, and memory has none. The defaults are a library choice: 1 MiB is far above a typical
// job payload and well below the size that makes a batch slow to encode, move and decode (one
// large message published and delivered on one node peaks at about 4 times its size on the
// heap, half of it encoding/json's transient buffers: BenchmarkLargeMessage in the memory
// adapter); 8 MiB lets MaxBatchMessages medium-sized messages travel as one batch. Apps that move large documents raise the limits,
// or better store the document elsewhere and publish its key.
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
// A batch takes the terminal path (dead letter, OnError) once per batch id. Settles (Ack, Retry,
// Drop) that fail with ErrBackendUnavailable are tried three times with a short backoff within
// the claim's fence; a batch whose Drop still failed comes back after its lease expires and is
// then recognised by its id: by the node's bounded memory of the batches it dead-lettered, and
// across nodes by a DeadLetterSink that answers ErrAlreadyDeadLettered (the outbox's store does,
// keeping the first reason, error and attempts). Such a batch is dropped again without a second
// dead letter, drop count or OnError. Without a sink the guarantee holds per node only.
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
// # Leases and self-fencing
//
// A claim's lease ends at Claim.LeaseUntil on the backend unless the node extends it. The node
// does not trust an extension it cannot confirm: a claim whose lease has not been confirmed
// extended by LeaseUntil - LeaseMargin(Lease), on the node's own clock, is lost, whatever
// Extend did (failed with ErrBackendUnavailable, timed out, hung, or the node was paused). A
// timer per claim then cancels the listener's context at once with cause ErrLeaseLost (a hung
// Extend cannot delay it: each Extend is bounded by the fence), and the node attempts no
// settle for that claim; the batch runs again elsewhere after the backend's lease expires.
// Every settle is itself bounded by the fence. Exclusive rests on this rule, not on Extend
// calls succeeding: the other node can claim the batch only after LeaseUntil, and by then this
// node stopped its listener and its settles.
//
// The margin is max(Lease/10, 1s), at most Lease/4 (30 s lease: 3 s; 2 s lease: 500 ms;
// the 100 ms minimum lease: 25 ms). It covers the drift between the node's and the backend's
// clocks over one lease (adapters report LeaseUntil on the node's clock, measured from before
// the request, so only the rate differs, far below 10%), the time for the listener to see its
// cancelled context, and the round trip of a settle that must land before the backend's lease
// ends. The node extends a claim when less than three quarters of its lease is left (at once
// for a claim that arrives with less, then ticking every tenth of the lease, each failed
// extension tried again at the next tick), so extensions have at least half a lease to get
// through before the fence.
//
// A listener sees its fence with LeaseDeadline(ctx); it moves forward with each confirmed
// extension. A listener must return when ctx is done: its work may already be running
// elsewhere, and its result is not settled.
//
// # Shutdown
//
// Close never loses accepted messages: the publish buffer is flushed on a context of its own,
// bounded by NodeOptions.CloseFlushTimeout (default 15 s), whatever the ctx given to Close (an
// already cancelled one included), and what the backend did not take goes to the outbox
// (Handoff), whose rows are due for the very next sweep. Close's ctx bounds only the wait for
// running listeners.
//
// # Writing an adapter
//
// Implement Backend (backend.go documents every rule), register a URL scheme with
// RegisterBackend, and run the parity suite (package parity) against a real server.
package core
