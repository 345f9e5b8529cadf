// Package ledger keeps the life of every message in the app's PostgreSQL database: one row per
// message (queue and id) with its state (queued or delayed, running with node, start and run
// number, waiting to retry with runs, last error and next run, dead-lettered with reason and
// error, completed with time and runs, cancelled), so that operators can look a message up by
// id, list messages by queue, state and time (txmq's Inspector, `txmq msg`), and cancel one
// before it runs on any backend.
//
// The ledger is optional: txmq.Open creates one when Config.Ledger is set. Its table
// (<schema>.txmq_ledger) is migrated like the outbox's (Migrate, recorded in txmq_migrations
// under the component "ledger").
//
// Cost: nodes record events through RecordMessages, which only appends to a buffer; a
// background flusher writes the buffer every Options.FlushInterval (or sooner when it holds
// Options.FlushSize events) as one multi-row INSERT ... ON CONFLICT statement. Before a node
// runs a batch it asks CancelledMessages, answered from memory: the ledger reads new cancels
// every Options.CancelCheck (250 ms), and asks the table per batch only while those reads
// fail. CancelMessage returns after twice CancelCheck, when every node sees the cancel. The
// ledger writes one row per message (the jobs table of SQL jobs holds one per batch), so at 100
// messages per batch it costs about half the throughput of SQL jobs on a small shared machine
// (BenchmarkLedgerCost: 0.60 of it with the ledger off, in one run). A background pruner
// deletes completed and cancelled rows older than Options.Retention (default 24 h) in bounded
// deletes of Options.PruneBatch rows. Dead-lettered rows stay until their messages are replayed
// and complete.
//
// Ordering: each event carries its time on the recording node's clock; a row takes an event
// only when it is not older than the row's, so a late group from one node never moves a
// message back. A cancelled row takes only a completion (a batch that was already running when
// the cancel came finished: a running batch is not interrupted).
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
//     and a batch whose messages are all completed, cancelled or dead (a node acks a batch of
//     cancelled messages without a run, or a settle was lost) is settled by the republisher
//     instead of published.
//   - Retention: kept batches are not pruned by Retention: they leave on their settle, or
//     after the last republish.
//   - Cost: one more statement per group of publishes (the keep, on the publish path: a flush
//     waits for it) and two more in the grouped writes' round trip. BenchmarkLedgerCost on
//     SQL jobs, 100 messages per batch, 30,000 messages, means of 3 samples of one run on a
//     shared 2-core machine at load average 16: throughput with the ledger off 30,400
//     msgs/s, on 22,760 (0.75), in mode 14,800 (0.49 of off, 0.65 of on); write-ahead log
//     per message 21 B off, 766 B on, 793 B in mode (1.04 times on: the kept bodies are
//     compressed, and the ledger's own row per message is most of the write amplification).
//   - Proof: the parity property messages/ledger_mode_republishes_lost_batch (a backend that
//     acknowledges and forgets a plain and a transactional publish's batch, on every adapter)
//     and the chaos scenario redis/restart-backend-noaof-ledger (missing 0 where the same
//     restart without the ledger loses about 50 of 2,000).
//
// Consistency: events are written asynchronously, so a lookup from another process may miss
// the last FlushInterval of events; the Ledger's own lookups and cancels flush its buffer
// first. Events still buffered when a process dies are lost (the row then shows an earlier
// state until the next event of the message).
package ledger
