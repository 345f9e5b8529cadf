// Package sqljobs is the txmq backend that keeps batches in a jobs table of the app's own
// PostgreSQL database (pgx v5), so an app with only Postgres gets durable, clustered delivery
// with no other server. Every node (process) opens a Backend on the same database and schema.
//
//	if err := sqljobs.Migrate(ctx, pool, nil); err != nil { ... }
//	be, err := sqljobs.New(ctx, pool, &sqljobs.Options{DeadLetters: store})
//	node, err := core.NewNode(&core.NodeOptions{Backend: be})
//
// or, by setting, TXMQ_BACKEND=postgres://user@host/db?txmq_schema=txmq (see Open), which
// creates a pool and migrates.
//
// # Storage
//
// Migrate creates, in Options.Schema (default "txmq", the outbox's schema), the table
// txmq_jobs (one row per batch: queue, batch id, body, deliveries, run_at, lease owner and
// token, created time), txmq_jobs_exclusive (the Exclusive locks), txmq_jobs_queues (fetch
// heartbeats) and a lease-token sequence. A row's state is derived from run_at and
// lease_token: unleased rows are ready once run_at has passed and delayed before; for a
// leased row run_at is the lease's end, and a lease that ran out is ready again. So
// "claimable" is exactly run_at <= now(), and one index on (queue, run_at) makes every claim a
// range scan of claimable rows only, whatever the table's size.
//
// # Claiming
//
// Fetch runs one statement for all the queues of a request: per queue a LATERAL index scan
// with FOR UPDATE SKIP LOCKED limited to the queue's free slots (Unlimited queues share
// FetchRequest.Max round-robin), then an UPDATE that gives each picked row a new lease token
// from a sequence, deliveries+1 and run_at = now()+lease, returning the claims. The same
// statement returns when the next row of those queues becomes claimable, for the wait timer.
// Time is always the database's clock: a delayed publish stores run_at = the database's clock
// plus the batch's delay (core.OutgoingBatch.Delay), never the app's absolute due time, so an
// app clock behind or ahead of the database's cannot make a batch early or late.
//
// Exclusive queues: in the same statement, the claim of an Exclusive queue's row inserts the
// queue's row in txmq_jobs_exclusive, or takes it over only if its lease ran out (INSERT ... ON
// CONFLICT DO UPDATE ... WHERE lease_until <= now()); the row is claimed only if that
// succeeded. The unique key serialises concurrent claimers on every node, so at most one batch
// of the queue is leased in the whole cluster. Extend moves the lock with the lease; Ack,
// Retry and Drop delete it (and NOTIFY, waking nodes waiting for the queue); a lease that runs
// out releases it with the lease.
//
// # Leases
//
// Claim.Handle holds the row id and the claim's lease token. Extend, Ack (DELETE), Drop
// (DELETE) and Retry (UPDATE) match id, token and an unexpired lease; no match is an error
// wrapping core.ErrLeaseLost. The handle remembers a successful settle, so settling the same
// claim again is a no-op. Retry with a body rewrites it and restarts Deliveries at 0; with a
// nil body it is a retry in place.
//
// Concurrent Acks and Drops share one DELETE ... USING unnest(ids, tokens) RETURNING id,
// lease_token statement, and concurrent Extends one UPDATE, the way a database group-commits:
// a settle that finds no statement of its kind running goes at once; otherwise it waits up
// to Options.SettleWindow (1 ms) or until Options.SettleBatch (100) are pending. Each call
// returns its own claim's outcome, read from the returned (id, token) pairs. The statement
// runs detached from the callers' cancellation; a caller that stops waiting gets its
// context's error, and the handle still records a delete the statement made. A call whose
// context has already ended settles nothing and returns the context's error.
//
// Claims, Acks, Drops and Extends commit with synchronous_commit = off, set for their own
// transaction only (Options.DurableSettles turns this off); Publish and Retry always wait for
// their commit to be flushed, and so do claims and extensions of Exclusive queues (a lock
// forgotten in a crash would let two nodes run the queue). A database crash may forget the last fraction of a second of
// claims and settles, which at-least-once delivery absorbs: a forgotten claim or extension
// is a lease that ran out, a forgotten Ack a batch delivered again.
//
// # Wake-ups and idle cost
//
// Publish and Retry send pg_notify on the channel "txmq_jobs_<schema>" with the queue name
// as payload. Each Backend holds one LISTEN connection (opened by the first waiting Fetch,
// outside the pool, reopened with backoff) and wakes the fetches waiting on that queue, so an
// idle node picks up new work within milliseconds. While idle, a node runs one claim
// statement per FetchRequest.Wait (one index probe per queue: cheap with 1,000 queues), and a
// timer wakes it when a delayed batch or a lease is due.
//
// # Abandoned queues
//
// Fetch records per queue, at most once a minute, that it was fetched. A reaper (Reap; run
// when the Backend is made and every ReapInterval) finds queues with batches that no node has
// fetched within AbandonedAfter (default 7 days) and hands their batches older than that to
// Options.DeadLetters (reason ReasonAbandoned), deleting each only after the sink took it.
// Without a sink they are logged and counted (Stats) and left in place: never deleted
// silently.
//
// # Errors
//
// Errors meaning the database is unreachable or refusing work (connection refused, reset or
// closed, a closed pool, timeouts, SQLSTATE classes 08 and 57P, 53300) wrap
// core.ErrBackendUnavailable; see Unavailable. Every statement is bounded by QueryTimeout.
package sqljobs
