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
// Consistency: events are written asynchronously, so a lookup from another process may miss
// the last FlushInterval of events; the Ledger's own lookups and cancels flush its buffer
// first. Events still buffered when a process dies are lost (the row then shows an earlier
// state until the next event of the message).
package ledger
