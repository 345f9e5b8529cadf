// Package ledger keeps the life of every message in the app's PostgreSQL database, so that
// operators can look a message up by id, list messages by queue, state and time (txmq's
// Inspector, `txmq msg`), and cancel one before it runs on any backend. A message's state is
// queued or delayed, running (node, start, run number), waiting to retry (runs, last error,
// next run), dead-lettered (reason, error), completed (time, runs) or cancelled.
//
// The ledger is optional: txmq.Open creates one when Config.Ledger is set. Its tables are
// migrated like the outbox's (Migrate, recorded in txmq_migrations under the component
// "ledger").
//
// Layout: the messages of a batch share their fate (they run, retry, dead-letter and complete
// as a unit), so the ledger keeps state per batch, and a message needs a row of its own only
// where its batch cannot speak for it:
//
//   - <schema>.txmq_ledger_states has one row per batch (queue, batch id): its last state and
//     details, its publish time, its message ids and the span of their ids' times (ids_at,
//     under a GiST index), upserted at each event of the batch. An id made by core.NewID
//     carries the millisecond it was made (core.IDTime), so a lookup by id reads the few
//     batches whose span holds that time and whose ids hold the id.
//   - <schema>.txmq_ledger has a row per message only for what its batch cannot say: a message
//     staged in a transaction (no batch until the outbox relay gives it one), a cancelled one,
//     and ids that carry no time (ids a caller chose with txmq.ID, or a batch whose ids were
//     made more than an hour apart), which point at their batch and move with it, one
//     primary-key probe each. Indexes: the primary key (id, queue) and (queue, published_at).
//   - A lookup or listing resolves a message from the two: the newest batch that holds it
//     (by update time), unless its row says otherwise: a message without a batch keeps its own
//     state until a batch updated since holds it, and a cancelled message takes only its
//     batch's completion (the batch was running when the cancel came, and the message ran
//     with it); a message a node left out of a run has left its batch. A message's publish
//     time is its row's, or the publish of the batch that holds it.
//
// Migration 0003 moved the rows of the first layout (one row per message, state and all) to
// per-batch state in place, and migration 0004 added the spans; the rows of either stay valid
// (each points at its batch) and nothing is dropped.
//
// Running and the lease: a node records a run's start with the end of the lease it holds (the
// state row's due time), and records it again at each lease extension (an event as old as the
// run's start, so it never moves a batch past a later event). A reader (lookups, listings and
// their state filter, txmq msg ls --state running) takes a running state whose lease ended
// for queued since the lease's end: the node died or lost the lease, and the backend hands the
// batch out again; the next run's start, recorded by whichever node takes it, moves it on. So
// a crashed node's messages read running for at most one lease (parity property
// messages/ledger_running_converges_after_crash). A running state recorded without a lease end
// (by a build before this rule) stays running until its next event.
//
// Cancel scope (migration 0005): a cancel applies to the messages it found, never to a later
// publish that reuses the id. CancelMessage records on the message's row the cancel's time
// (cancel_at: the cancelling process's clock, and never before the message's last recorded
// event) and the batch that held the message (cancel_batch; empty for a message staged in a
// transaction, not yet in a batch). A node leaves a message out of a batch when that batch is
// the one the cancel found, or was made (its envelope's time, on the publishing node's clock)
// no later than cancel_at: a message staged before the cancel, relayed by the outbox in a batch
// of its own, and a batch an adapter split under new ids are covered; a publish after the
// cancel is not, and runs. The row then follows the later message: a loose event published
// after cancel_at, or a batch published after it that holds the id (not the cancelled batch),
// gives the row its state, batch and publish time, and the cancel stays on it (a later cancel
// replaces it and, by its time, covers the earlier batches too). A node's left-out event for
// the old batch no longer changes such a row. Lookups take, for a row with a cancel, only the
// batches published after it (or the cancelled batch's completion, when the cancel found it
// running). The judgement of "after" compares the clocks of the publishing node and of the
// cancelling process for batches other than the one the cancel found: with clocks apart by
// more than the time between a cancel and a new publish of its id, that publish may be left
// out too (logged at info level, "cancelled messages left out of the batch"), as every publish
// of a cancelled id was before migration 0005. Cancels made before the migration keep their
// update time and batch as their scope; a cancel made by a process of an earlier build during
// an upgrade (no cancel_at) is read the same way.
//
// Cost: nodes record one event per batch (core.BatchEvent) through RecordBatch, which only
// appends to a buffer; a background flusher writes the buffer every Options.FlushInterval (or
// sooner when it holds Options.FlushSize message events) in one round trip and one
// transaction: the rows of staged and cancelled messages and of ids without a time (one
// primary-key probe each), an upsert of one row per batch (its ids sent as one string), and
// ledger mode's statements. A batch of messages made by core.NewID costs its batch row and
// nothing per message but its id in that row. The write does not wait for the log's flush to
// disk (synchronous_commit off in its transaction): the events were in memory only anyway.
// A batch whose run outlasts about a quarter of its lease costs one more batch event per lease
// extension (its lease end); the rows' cancel columns are NULL but on cancelled ids, and the
// write statements test them on the rows they probe anyway (no statement more).
// Every statement runs with sequential scans off in its transaction (enable_seqscan), so it
// takes an index whatever the statistics say (TestStatementPlans). Before a node runs a batch
// it asks CancelledMessages, answered from memory: the ledger reads new cancels every
// Options.CancelCheck (250 ms; two partial-index scans, by cancel_at and, for cancels of
// earlier builds, by update time), and asks the table per batch only while those reads fail.
// CancelMessage returns after twice CancelCheck, when every node sees the cancel. A message's
// whole life costs about 30 bytes of write-ahead log (BenchmarkLedgerWrite; a row per message
// wrote about 350 bytes, and a row per message and event 1,600); see the Ledger table of
// docs/performance.md for the throughput with and without it. A background pruner deletes, in
// bounded deletes of about Options.PruneBatch rows, cancelled messages and batches completed
// more than Options.Retention ago (default 24 h) with their messages' rows, and older batch
// rows that hold no message any more. Dead-lettered batches stay until their messages are
// replayed and complete.
//
// Upgrading: run every process of an app on a build with migration 0004 before relying on
// lookups. A process of an earlier build still writes rows for every message (which this
// layout reads), but its lookups do not see the messages a newer process recorded without a
// row, and its pruner deletes the rows of batches older than Retention that did not complete
// (dead letters) when no message row points at them (their messages then read as unknown).
// Migration 0005 adds two nullable columns and a partial index to txmq_ledger and sets them on
// the cancelled rows (a cancel made before applies to its batch and to the batches made before
// it). A process of a build before it, running beside a newer one, still leaves out every
// publish of a cancelled id and reads a later publish of one as cancelled, and its running
// states carry no lease end.
//
// Ordering: each event carries its time on the recording node's clock; a batch row takes an
// event only when it is not older than the row's, so a late group from one node never moves a
// batch back. A cancelled message takes only its batch's completion, or a later publish of
// its id. A message moves to another batch only for an event newer than its last move.
//
// # Ledger mode
//
// With Options.Mode on, the ledger also keeps every batch published (body and all, in
// <schema>.txmq_ledger_batches) until its completion or dead letter is recorded, and
// publishes again a batch that shows no sign of life within Options.Horizon, so that a
// transport that forgets what it acknowledged (Redis restarted without an append-only file, a
// JetStream server killed before its fsync) loses nothing that was published: delivery stays
// at least once (a republished batch that was only slow runs twice), never less.
//
//   - What is kept: a node keeps each batch (KeepBatch) before it writes it to the backend, and
//     the outbox's relay and sweep keep what they publish through Keeping (txmq.Open wires
//     both). Concurrent keeps share one statement (group commit). A node whose keep fails (the
//     app database does not answer) logs it and publishes anyway; the outbox leaves the row for
//     its next pass (no attempt counted).
//   - Settle and signs of life: the events nodes record anyway carry the batch id: a
//     completion or dead letter deletes the kept batch, a run's start or a retry pushes its
//     deadline to Horizon after it (after the retry's due time), all in the round trip of the
//     grouped write.
//   - Horizon: default HorizonFor(lease) = 10 leases + 1 min (6 min with the default 30 s
//     lease; txmq.Open uses the node's lease), so that a lease's expiry and the backend's own
//     redelivery (a reaper's period, a restart) come well within it. It must also exceed the
//     longest wait of a batch in a backlog: a batch waiting longer is published again (a
//     duplicate, not a loss). Every process of an app uses the same value.
//   - Who republishes: every node in mode runs RunRepublisher (every RepublishInterval); a
//     pass runs in one transaction holding a PostgreSQL advisory lock per ledger table
//     (pg_try_advisory_xact_lock), so one node of the cluster republishes at a time and the
//     others skip the pass. A pass takes at most RepublishBatch due batches (FOR UPDATE SKIP
//     LOCKED, by deadline), publishes each with a 10 s bound, and stops at a backend reported
//     unavailable. A republished batch keeps its id and body (its attempt count restarts
//     from the body's), waits Horizon times 2^republishes for its next deadline, and after
//     MaxRepublish republishes (default 5) is no longer kept: logged at error level and
//     counted (Stats.GaveUp). Order across republished batches of an ordered queue's key is
//     not kept.
//   - Dead letters: a dead-lettered batch is settled (the dead-letter store holds it); a
//     replay publishes it through the outbox, which keeps it again.
//   - Cancel: cancelled messages stay in their kept batch; a node leaves them out of the run,
//     and a batch whose messages are all completed, cancelled or dead, or cancelled in that
//     batch (the id may have been published again since), is settled by the republisher
//     instead of published (a node acks a batch of cancelled messages without a run, or a
//     settle was lost). A run's lease extensions do not push a kept batch's deadline: only
//     the run's start and a retry do, as before.
//   - Retention: kept batches are not pruned by Retention: they leave on their settle, or
//     after the last republish.
//   - Cost: one more statement per group of publishes (the keep, on the publish path: a flush
//     waits for it) and two more in the grouped writes' round trip. BenchmarkLedgerCost, 100
//     messages per batch, 200,000 messages per variant, medians of 5 interleaved rounds, three
//     runs on a shared 2-core machine: throughput in mode 0.62–0.67 of the ledger off on SQL
//     jobs (on: 0.84–0.95) and 0.29–0.30 on Redis (on: 0.70–0.83); write-ahead log per message
//     on SQL jobs 20 B off, 35 B on, 49 B in mode (the kept bodies are compressed).
//     BenchmarkLedgerPickup: pickup p50 in mode 1.00 of off on SQL jobs and on Redis.
//   - Proof: the parity property messages/ledger_mode_republishes_lost_batch (a backend that
//     acknowledges and forgets a plain and a transactional publish's batch, on every adapter)
//     and the chaos scenarios redis/restart-backend-noaof-ledger (missing 0 where the same
//     restart without the ledger loses about 50 of 2,000) and nats/restart-backend-nosync-ledger
//     (kill -9 of a lazily syncing nats-server: missing 0, asserted).
//
// Consistency: events are written asynchronously, so a lookup from another process may miss
// the last FlushInterval of events; the Ledger's own lookups and cancels flush its buffer
// first. Events still buffered when a process dies are lost, and so are the last grouped
// writes (a fraction of a second) when the database crashes (the message then shows an
// earlier state until the next event of its batch).
package ledger
