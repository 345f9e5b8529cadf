// Package txmq is durable background work for Go apps: declare queues, publish JSON messages
// (atomically with the app's database transaction when it wants), register one listener per
// queue. Where the bytes travel is a setting, not code: SQL jobs in the app's own Postgres,
// memory, Redis, Amazon SQS or NATS JetStream. This is the one package an app imports (plus its
// own database driver); adapter authors read package core instead.
//
//	var Emails = txmq.MustDeclare("emails", txmq.QueueConfig[Email]{Transactional: txmq.Try})
//
//	app, err := txmq.Open(ctx, nil) // reads TXMQ_BACKEND, TXMQ_DATABASE_URL, ...
//	if err != nil { ... }
//	defer app.Close(context.Background())
//	_ = Emails.Listen(app.Node, sendEmail)
//	_ = app.Node.Start(ctx)
//	err = app.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
//		// business writes with tx, then:
//		return Emails.Publish(ctx, app.Node, Email{To: "a@example.com"})
//	})
//
// Backends register their URL scheme when their adapter package is imported, the way
// database/sql drivers do: memory:// is always there; an app that may run on Redis imports
// _ "github.com/txmq/txmq/adapters/redis", and one whose operators may pick any backend imports
// _ "github.com/txmq/txmq/adapters/all". Only the imported adapters' SDKs are linked. The
// Redis, SQS and NATS adapters are modules of their own (go get
// github.com/txmq/txmq/adapters/redis), so this module requires none of their SDKs and an app's
// module graph holds only those of the adapters it imports; memory and SQL jobs (pgx) are part
// of this module.
//
// # Declaring, listening, publishing
//
// A queue is declared once, with a closed and validated config, usually in a package-level var:
//
//	var Emails = txmq.MustDeclare[Email]("emails", txmq.QueueConfig[Email]{Transactional: txmq.Try})
//
// A Node publishes and consumes on one Backend (memory, sqljobs, redis, sqs, nats; see
// OpenBackend). Register one listener per queue per node, then Start:
//
//	node, _ := txmq.NewNode(backend, nil))
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
// Nothing is published if the transaction rolls back. A schedule's tick is an outbox row of
// its claim's transaction whatever the mode (see Queue.Schedule). Immediate means the node's coalescing
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
// Delivery is at-least-once and unordered (unless a queue is Ordered, below); listeners get a
// slice of messages and must be idempotent. Each node runs one polling driver that asks the backend's Fetch for exactly the
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
// A batch takes the terminal path (dead letter, OnError) once per batch id and replay. Settles
// (Ack, Retry, Drop) that fail with ErrBackendUnavailable are tried three times with a short
// backoff within the claim's fence; a batch whose Drop still failed comes back after its lease
// expires and is then recognised by its id and replay generation: by the node's bounded memory
// of the batches it dead-lettered, and across nodes by a DeadLetterSink that answers
// ErrAlreadyDeadLettered (the outbox's store does, keeping the first reason, error and
// attempts, and for an earlier generation than its last replay). Such a batch is dropped again
// without a second dead letter, drop count or OnError. Without a sink the guarantee holds per
// node only. A replay of the dead letter is a new generation, which runs, and takes the
// terminal path again if it fails for good; on a backend that keeps one batch per id (Redis)
// a replay made while the original is still stored under a live lease is refused with
// ErrStillStored; once that lease has ended the original is removed and the replay stored.
//
// # Retries
//
// The delay before a retry is the queue's QueueConfig.Backoff if it sets one, else the node's
// NodeOptions.Backoff (default DefaultBackoff: 1 s doubling to 10 min, jittered). A listener's
// error can change the outcome of its run; a plain error keeps the meaning above:
//
//   - RetryAfter(d, err): the next run comes no earlier than d from the failure, instead of
//     after the backoff (a rate-limited API's Retry-After). The run is spent as any failure;
//     past the budget the batch is dead-lettered with reason delivery_exhausted.
//   - Permanent(err): dead letter now, whatever budget is left: one dead letter with reason
//     permanent (ReasonPermanent), the drop counted (Stats.Dropped) and logged, OnError
//     called once with the listener's error, no further run.
//
// Both are found with errors.As anywhere in the returned error's chain (PermanentError,
// RetryAfterError), and both let errors.Is and errors.As reach the wrapped error. If one
// chain holds both, Permanent wins. A run cancelled by Close is given back as before,
// whatever its error says.
//
// A queue's QueueConfig.ClassifyError decides the same for errors the listener does not
// mark itself (a driver's, an SDK's): it sees each failed run's error and run number before
// the policy does and returns the error to act on, marked (Permanent, RetryAfter, Snooze,
// Discard) or as it was. It is not asked for a lost lease, a run given back by Close, or
// per-message Results. It applies the same on every routing mode, publish path and backend
// (it acts where the node settles a run); on an Ordered queue its Permanent moves the key on
// as above; on an Exclusive queue it decides only what happens to the batch after its run
// (the next batch still waits for the settle); each stored copy of a batch is classified on
// its own run; the ledger records the outcome the marked error leads to (retry, dead with
// reason permanent, completed with reason discarded). Parity policy/classify_error_decides
// checks it on every adapter.
//
// On an Ordered queue a retried batch is still its key's head: RetryAfter blocks the key
// for at least d, and a Permanent head is dead-lettered and the key moves on to its next
// message. On an Exclusive queue a batch waiting for its retry is not in flight: other
// batches of the queue run meanwhile. Each stored copy of a batch (duplicate delivery) runs
// on its own; a Permanent error on both copies takes the terminal path once per batch id, as
// above (one dead letter, one OnError call). With a ledger, the retry is
// recorded as usual (its due time is the RetryAfter delay) and the dead batch's event
// carries the reason permanent and the listener's error.
//
// # Outcomes
//
// A listener can report an outcome per message of its batch instead of one error for all:
// NewResults(msgs) starts with every message done, marks go by index in msgs (ResultIndex
// finds an index by message id), and res.Err() is returned:
//
//	res := txmq.NewResults(msgs)
//	for i, m := range msgs {
//		switch err := charge(ctx, m); {
//		case errors.Is(err, errCardExpired):
//			res.Drop(i, err)            // dead letter now (reason permanent), OnError with it
//		case errors.Is(err, errDuplicate):
//			res.Discard(i, "duplicate") // done, no dead letter, counted (reason discarded)
//		case errors.Is(err, errRateLimited):
//			res.Snooze(i, time.Minute)  // again in 1 min, the run not spent
//		case err != nil:
//			res.Retry(i, err)           // the backoff (RetryAfter: its own delay), run spent
//		}
//	}
//	return res.Err() // nil when every message is done
//
// A one-message listener has the whole-batch one-liners: return Snooze(d), Discard(reason),
// Permanent(err) or RetryAfter(d, err). A retried message past the budget is dead-lettered
// (delivery_exhausted); a message snoozed more than QueueConfig.MaxSnoozes times (default
// 100) is dead-lettered with reason snooze_exhausted, so nothing snoozes for ever. A discard
// is logged with its reason and counted with reason discarded: Stats.Dropped and the metric
// batches_dropped{reason="discarded"} count discard groups, Hooks.Dropped gets each group's
// message count. Snoozes are counted in Stats.Snoozed (no metric of their own yet); retried
// parts in Stats.Retried and Hooks.Retried as any retry.
//
// When every message takes one path the run settles as the plain error would (Ack, Retry,
// the terminal path); the plain paths (nil, a plain error) cost one type assertion more. A
// batch whose messages take several paths is split: the dropped messages are dead-lettered
// (OnError with them alone), the retried and snoozed ones stored as batches of their own
// (parts, with the same message ids, bodies and trace contexts, attempt = this run for a retry
// and one less for a snooze), then the claim removed: in one step on a backend with
// core.Splitter (memory, SQL jobs, MySQL), else each part published and then the claim acked (a crash
// in between runs the whole batch again, as at-least-once allows). Each group gets a derived
// batch id, <batch>/<attempt>/<outcome>-<hash of its message ids, delay and reason>, so that a
// second copy of the same run (duplicate delivery, a redelivery after a crash) gets the same
// ids: a drop group takes the terminal path once per derived id. A discard of a second copy
// is counted again, as its run is.
//
// Where it meets the rest: every routing mode (Require, Try, Never) and every publish path
// (direct, RunInTx, WithTx, handoff, sweep, replay, schedule, drain) deliver batches the same
// way, so outcomes apply to all of them; parts are stored directly in the backend, never
// through the outbox, and carry no id dedup window (their ids were deduplicated at publish).
// On an Ordered queue the first retried or snoozed message holds the key: it and every message
// after it (whatever their marks: they ran out of order, which is logged) go back as the
// claim's rewritten body, at the head of the key, through Retry; a snoozed head holds the key
// for the snooze as a retried head does for its backoff; dropped and discarded messages before
// it leave. (NATS retries a keyed batch in place, keeping its old body: there the whole batch
// runs again, and a snooze of a keyed batch spends its run.) On an Exclusive queue the split
// settles the claim as an Ack does and the parts are ordinary batches of the queue, one in
// flight at a time. A run that timed out (RunTimeout) or lost its lease has no outcomes: it is
// the plain failure it was. With a ledger, each group has its event: completed (a discard with
// reason "discarded: <reason>"), retry and its due time, delayed with reason snoozed and its
// due time, dead with its reason; `txmq msg` and the dashboard show a message's last one.
//
// # Ordering
//
// A queue declared with QueueConfig.Ordered keeps per-key order: every publish names a key
// (Key("acct-42"); publishing without one is an error naming the queue), and the messages of a
// key reach the listener in the order of their publish calls, while different keys run in
// parallel:
//
//	var Ledger = txmq.MustDeclare("ledger", txmq.QueueConfig[Entry]{Transactional: txmq.Try, Ordered: true})
//	err := Ledger.Publish(ctx, node, entry, txmq.Key(entry.Account))
//
// What is promised, on every backend that supports it (see the table under Ordering in docs/guide.md):
//
//   - A batch holds the messages of one key (the coalescing buffer groups by key; many keys
//     still share one flush, and the queue's buffer counts as full when one key fills a
//     batch), and at most one batch per key is in flight cluster-wide.
//   - Order is the order of publish calls made by one node for one key. Inside a transaction
//     it is the order of staging; across transactions that commit one after the other it is
//     commit order (the outbox publishes a key's row only once every earlier row of the key
//     has left it). Publishes of one key from different nodes at the same time, or from
//     transactions that overlap, have no defined order between them: give a key one writer,
//     or serialise its writers (a row lock on the account does).
//   - A failing batch blocks its key through its retries and backoff (head of line), until it
//     succeeds or is dead-lettered; then the key moves on. Other keys are not held up.
//   - A delayed message (After, At) holds back the later messages of its key until it is due
//     and done.
//   - At-least-once still holds: a message may come twice (a lost lease, a duplicate copy),
//     but a batch whose lease was lost runs again before the next batch of its key, so a
//     repeat never overtakes a later message.
//   - The order holds across every path a message takes, mixed as an app mixes them: a
//     direct publish (the coalescing buffer), RunInTx (the after-commit publishers), WithTx
//     and WithSQLTx (the relay), a flush the backend refused (handed to the outbox), a row
//     left for the recovery sweep, a node restart, a replayed dead letter and a drain; the
//     next four items say how.
//   - A key's flushes reach the backend in the order the buffer gave them out, even when two
//     overlap (a full buffer still being written when the next tick takes more).
//   - A publish of a key inside a transaction first stores the key's direct publishes made
//     before it (still in the buffer, or being written), so its row cannot overtake them.
//   - Once a batch of a key went to the outbox (a refused flush, or a transaction of this
//     node that committed a row of it), the node's later batches of that key follow it there
//     for as long as the outbox holds rows of the key: the node asks before each such write
//     (core.KeyHolder, which outbox.Store implements), and the outbox publishes a key's rows
//     in id order. A new node reads once per ordered queue, before its first keyed write,
//     which keys the outbox holds (core.KeyLister), so a restart during an outage keeps the
//     order too.
//   - A replayed dead letter goes to the back of its key (behind the key's batches stored
//     when it is replayed); a drain publishes a key's new batches behind the ones the old
//     backend still holds (package drain).
//   - What it costs, only where paths meet on one key: a publish inside a transaction waits
//     for one backend write when the key was published directly in the last buffer window
//     (at most about 100 ms before), bounded by twice ClaimTimeout; the first direct write
//     of a key after the node's transaction committed a row of it asks the outbox one
//     indexed question, and while the row is still there it goes to the outbox behind it,
//     where the relay publishes it as soon as the row is gone (woken by the after-commit
//     publisher, not at the next sweep). Every wait is bounded, and rows of a key that
//     cannot be published end in the dead-letter table, which frees the key. A direct
//     publish made from another goroutine while an app-managed transaction (WithTx) that
//     staged the same key is still open has no defined order with that transaction.
//   - Exclusive and MaxConcurrentBatches keep their meaning, counted in batches.
//
// A node refuses an Ordered queue (at NewNode, Listen or Publish, naming the queue and the
// adapter) when its backend does not enforce per-key order (core.KeyOrderer). A drain wrapper
// keeps per-key order old backend first, per key (see package drain). Schedules on an Ordered
// queue are refused (they publish without a key).
// A key is 1 to 128 bytes of printable ASCII without spaces (SQS's MessageGroupId set), the
// same on every backend; hash longer keys.
//
// # Priorities
//
// A queue declared with QueueConfig.Prioritized gives each publish a priority from MinPriority
// (0, the default: QueueConfig.DefaultPriority) to MaxPriority (9), with the Priority publish
// option; higher runs first among the queue's ready batches, with aging: a batch of priority p
// sorts as if due p*PriorityAging (W, default 1 s) earlier than it is, and is never handed out
// before it is truly due. A batch therefore waits at most 9*W behind higher-priority batches
// that became due after it, however many keep coming. Publishes of different priorities never
// share a batch; the priority rides in the batch (through the outbox, retries, replays, the
// ledger's republisher and a drain). A key's publish order comes first on an Ordered queue.
// A node refuses a Prioritized queue on a backend that does not honour priorities
// (core.Prioritizer: memory, sqljobs, mysql and redis do; sqs and nats do not). See
// "Priorities" in docs/guide.md for where priorities meet the other features.
//
// # Fair share by key
//
// A queue declared with QueueConfig.Fair shares its claims round-robin across fairness keys
// (FairKey; an Ordered queue's ordering key when the publish sets none): one ready batch of
// the next key in turn per claim, so a batch waits at most one batch per other key with ready
// work, however large their backlogs. Per-key order comes first, then fairness, then priority
// (within a key). A node refuses a Fair queue on a backend that does not share fairly
// (core.FairSharer: memory and sqljobs so far). See "Fair share by key" in docs/guide.md.
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
// The engine also guards against an adapter that breaks this: the envelope records the due time on
// the publisher's clock (Envelope.Due), and a batch that arrives more than twice MaxClockSkew
// before it by the consuming node's clock (the two nodes' clocks may be that far apart, so
// closer than that the guard cannot tell early from skew and stays silent) is given back
// with Retry for what is left plus that allowance (late rather than early), with its attempt
// count unchanged: it is not a run, no listener, OnError or dead letter is involved, and
// Stats.EarlyArrivals counts it. With an adapter that retries in place (keeps the old body
// and its delivery count) the give-back would count as a delivery; every adapter in this
// module rewrites.
//
// # Run timeouts
//
// Every queue bounds its runs (QueueConfig.RunTimeout, default DefaultRunTimeout, 30 min;
// NoRunTimeout turns it off). At the timeout the listener's ctx is cancelled with a cause
// wrapping ErrRunTimeout (context.Cause tells it from a lost lease or Close); a listener that
// then returns an error fails the run as any error does, that error wrapped in the timeout,
// and one that returns nil has done its work and is acked. A listener still running
// RunTimeoutGrace later (default a tenth of the timeout, at most 1 min) is declared failed
// without it: its goroutine's stack is logged, Stats.Stuck and Hooks.TimedOut count it, its
// slot is freed, and the batch takes the failure path at once: retried after Backoff while
// the budget lasts (the timed-out run is one run), else dead-lettered (delivery_exhausted,
// its error wrapping ErrRunTimeout) with OnError. Go cannot stop a goroutine: the stuck
// listener goes on with a done ctx, and whatever it returns later is ignored.
//
// A timed-out run never overlaps the next run of its batch or of its Exclusive queue, if its
// listener returns within the grace once its ctx is done: the claim stays held, its lease
// extended, until the hard step settles it (or, if that settle fails, until the lease the node
// then stops extending runs out), and neither the batch nor an Exclusive queue is handed out
// before. A timed-out run of an Ordered queue's head is a failed run: the key stays blocked
// until the batch's retry succeeds or is dead-lettered. Each stored copy of a batch (duplicate
// delivery) is timed and counted on its own. With a ledger, the run's event is a retry (or
// dead) with the timeout's error, as for any failed run.
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
// whatever the ctx given to Close (an already cancelled one included). Every batch is written
// while the backend accepts them, each write bounded by NodeOptions.CloseFlushTimeout (default
// 15 s), so a healthy backend loses nothing however large the buffer; once a write fails, what
// is not written yet goes straight to the outbox (Handoff), whose rows are due for the very
// next sweep, so a backend that is down delays Close by about one CloseFlushTimeout. Close's
// ctx bounds only the wait for running listeners.
//
// # Message ids
//
// Every message has an id: generated (unique, sortable by publish time) or given with ID or
// IDs at publish. A listener reads the ids of its slice with MessageIDs(ctx); they are the same
// in every run of a batch, through the outbox, a drain and a dead letter's replay. On a queue
// declared with QueueConfig.IDDedupWindow, an id given with ID or IDs deduplicates: a message
// whose id was already published to the queue within the window is left out (counted in
// Stats.Deduplicated), whether the repeat comes from another call, another node, a flush
// retried after a lost reply or the outbox's sweep. The backend does it atomically with the
// store (core.IDDeduper; each adapter's doc states its guarantee), so a publish that failed
// holds no id. A dead letter's replay is never deduplicated. Without a window, publishing an
// id twice delivers the message twice.
//
// # Middleware and headers
//
// Headers are string keys and values per message: Headers(map) gives them to every message
// of a publish call, a publish middleware may give each message its own, and the listener
// reads them with MessageHeaders(ctx), one map per message in the order of its slice. They
// are per message, not per batch, because a batch coalesces the messages of many calls. They
// ride in the batch's envelope, so they travel wherever the batch does: the buffer, the
// outbox (RunInTx, WithTx, the relay, a handoff, the sweep), retries, a dead letter and its
// replay, ledger mode's republish, a drain to another backend. A message's headers hold at
// most MaxHeaderBytes and count toward its size limit; a batch without headers is encoded
// exactly as before they existed.
//
// Middleware wraps, net/http style. A RunMiddleware wraps each run of a queue's listener and
// sees a RunRequest: the queue, the batch id, the message ids, the run number (Attempt), the
// ordering key, the headers and the stored payloads before they are decoded, so it can
// decrypt them; it may change ctx (a tenant, a logger), the payloads and headers, and the
// error, and not calling next ends the run with its own result. A PublishMiddleware wraps
// each Publish/PublishMany call after the messages are encoded and before they are routed,
// and sees a PublishRequest: the queue, the key, the ids, the headers and the encoded
// payloads, which it may change (encrypt: a payload must stay JSON, a base64 string for
// bytes), or refuse the call with an error. Node middleware (NodeOptions.RunMiddleware,
// PublishMiddleware) wraps the queue's (QueueConfig), and the first of each slice is the
// outermost. A node or queue without middleware runs the plain path, which pays nothing for
// it. See ExamplePublishMiddleware (payload encryption) and ExampleRunMiddleware (logging and
// tenancy).
//
// Where middleware meets the rest:
//   - Publish middleware runs once per call, on the caller's goroutine, before routing, for
//     every routing mode: Require and Try inside a transaction (the outbox row holds what it
//     left), Never (held until the commit), and outside a transaction. The ctx it passes on
//     carries the transaction, so it must pass ctx (or a child). A schedule's ticks are
//     publish calls too, and run through it.
//   - Batches already encoded are never re-run through publish middleware: the outbox's relay
//     and sweep, a handoff, a dead letter's replay, ledger mode's republish and a drain move
//     the stored payloads and headers as they are (already encrypted, for example).
//   - Run middleware runs inside the run: after the batch is decoded, its due time and
//     cancelled messages checked, and the budget counted, inside the run's timeout, its lease
//     and its slot (an Exclusive queue's one batch, an ordered key's head). Its error or panic
//     is the run's: retried by the budget, Permanent dead-letters at once. Payloads it leaves
//     that do not decode into the queue's type fail the run with a Permanent error wrapping
//     ErrUndecodable. OnError gets the messages as the last run on the node decoded them, nil
//     if none did.
//   - Each run of each stored copy (retries, duplicate delivery, a replay) runs the run
//     middleware again on the stored form: like listeners, middleware must be idempotent.
//   - Dead letters, the outbox, the ledger's kept batches and the backend hold the payloads as
//     the publish middleware left them, so with encryption none of them ever holds plaintext;
//     the Inspector's payload view and the dashboard show that form.
//   - Dedup (QueueConfig.Dedup) sees the payloads as the publish middleware left them: a
//     queue whose publish middleware changes the encoding cannot decode them in Dedup. Kept
//     messages keep their headers; ordering keys and ids are never changed by middleware.
//
// # Lookup, listing and cancel
//
// App.Inspector (Node.Inspector) looks a message up by id (Inspector.Get), lists messages by
// queue, state and publish time (Inspector.List) and cancels one that has not completed
// (Inspector.Cancel); `txmq msg` does the same from the shell. With the ledger (Config.Ledger,
// package ledger: a table in the app database where nodes record every publish and outcome in
// grouped writes) this works on every backend, and a node leaves cancelled messages out of a
// batch before the listener sees it (a batch left empty is acked). Without it, the backend's
// adapter answers when it implements the optional core.BatchInspector (memory, SQL jobs, Redis),
// and cancels when it implements core.BatchEditor (memory, SQL jobs). Otherwise the calls fail with ErrLookupUnsupported, whose
// message starts "unknown: no ledger configured". A running batch is never interrupted by a
// cancel.
//
// # Schedules and rate limits
//
// Queue.Schedule publishes a queue's messages at the ticks of a cron expression, each tick once
// cluster-wide: nodes claim a tick in the app database (NodeOptions.Ticks, set by Open) in the
// transaction that writes its outbox rows, whatever the queue's Transactional setting (a
// Never queue's ticks too), so a node that dies after a claim does not lose the tick. Ticks
// are fixed instants, the same on every node whatever its start: "@every D" is anchored at
// the Unix epoch (epoch + k·D). QueueConfig.RateLimit caps the batches that start
// per period: a token bucket per queue, shared by every node through the app database
// (NodeOptions.Limiter, set by Open), per node without one. The driver takes start tokens
// before a fetch and gives back those the fetch did not use.
//
// # Operations
//
// App.Pause and App.Resume stop and restart a queue on every node (a mark in the app database
// that nodes read every NodeOptions.PauseCheck; running batches finish). App.HealthHandler
// serves liveness (the polling driver turns) and readiness (backend, database, buffer and outbox
// backlog) probes. Node.RunHistory gives each queue's runs per minute over the last hour, and
// Registry.Info its settings, for dashboards (package ui). Packages prometheus and otel add
// metrics and trace spans.
//
// # Settings
//
//	TXMQ_BACKEND               backend URL; default memory://. Every adapter's scheme is
//	                           registered (memory:// always; every other scheme when its adapter is imported, or adapters/all for all): memory://,
//	                           postgres:// (SQL jobs), redis://, rediss://, sqs://, awssqs://,
//	                           nats://. Each adapter documents its URL's parameters.
//	TXMQ_DATABASE_URL          the app's PostgreSQL database; optional. With it: the outbox
//	                           (publishing inside transactions, handoff when the backend
//	                           refuses a flush) and the dead-letter table.
//	TXMQ_SCHEMA                schema of every txmq table of the app: outbox, dead letters and,
//	                           on a postgres:// backend, the jobs table (added to the URL as
//	                           txmq_schema). Default: the URL's txmq_schema, else txmq. Both
//	                           set and different is an error naming both.
//	TXMQ_MIGRATE               false: do not create or upgrade the tables at Open.
//	TXMQ_DRAIN_BACKENDS        old backend URLs, comma-separated, to drain after a swap.
//	TXMQ_DRAIN_CHECK_INTERVAL  how often an old backend's depths are checked; default 5s.
//	TXMQ_DRAIN_RECHECK_INTERVAL how often a drained old backend is checked again for batches
//	                           nodes on the old setting published since; default 30s.
//
// Secrets in URLs and connection strings (passwords, user-info tokens such as nats://TOKEN@host,
// password-, token- and key-like parameters) are never logged nor put in errors: see core.Redact.
//
// # Swapping the backend
//
// To move an app from SQL jobs to Redis with nothing lost: set TXMQ_BACKEND to the Redis URL
// and TXMQ_DRAIN_BACKENDS to the old postgres:// URL, and restart the nodes. They publish to
// Redis at once (outbox rows written before the switch included: the outbox relays them to
// the current backend), and keep running the batches left in SQL jobs until it is empty, then
// stop polling it (logged per node). During a rolling deploy, nodes not restarted yet still
// publish to SQL jobs: the new nodes re-check it every TXMQ_DRAIN_RECHECK_INTERVAL and poll it
// again when it holds batches. When no node runs the old setting any more and
// `txmq status --drain` shows the old backend empty, remove TXMQ_DRAIN_BACKENDS at the next
// deploy. See package drain for the details (exclusive queues, retries of old batches,
// backends with approximate counts).
package txmq
