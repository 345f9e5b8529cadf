// Package sqljobs is the txmq backend that keeps batches in a jobs table of the app's own
// PostgreSQL database (pgx v5), so an app with only Postgres gets durable, clustered delivery
// with no other server. Every node (process) opens a Backend on the same database and schema.
//
//	if err := sqljobs.Migrate(ctx, pool, nil); err != nil { ... }
//	be, err := sqljobs.New(ctx, pool, &sqljobs.Options{DeadLetters: store})
//	node, err := txmq.NewNode(be, nil)
//
// or, by setting, TXMQ_BACKEND=postgres://user@host/db?txmq_schema=txmq (see Open), which
// creates a pool and migrates.
//
// # URL and parameters
//
// Importing the package registers the postgres:// and postgresql:// schemes:
//
//	postgres://user:pass@host:5432/db?sslmode=disable&txmq_schema=jobs&pool_max_conns=8
//
// Parameters starting with txmq_ (the scheme of every adapter, matched here without regard to
// case) set Options and are removed before the rest of the URL goes to pgxpool.ParseConfig, so
// pool_max_conns, connect_timeout, sslmode and the like work as in pgx:
//
//	txmq_schema           Options.Schema
//	txmq_migrate          run Migrate first (true or false, default true)
//	txmq_lease            accepted (a Go duration) and ignored: the node's lease decides
//	txmq_fetch_limit      accepted (a positive number) and ignored: the node's FetchMax decides
//	txmq_query_timeout    Options.QueryTimeout (a Go duration)
//	txmq_abandoned_after  Options.AbandonedAfter (a Go duration)
//	txmq_reap_interval    Options.ReapInterval (a Go duration; negative turns the reaper off)
//	txmq_pgbouncer        Options.PgBouncer (true or false); true also sets pgx's
//	                      default_query_exec_mode=exec unless the URL names a mode
//	txmq_listen_url       Options.ListenURL (a direct postgres:// URL, query-escaped)
//	txmq_poll_interval    Options.PollInterval (a Go duration)
//
// An unknown txmq_ parameter is an error wrapping core.ErrInvalidConfig that lists the accepted
// ones; errors never show the password. Open creates its own pool, closed by Backend.Close. A
// dead-letter sink for the reaper cannot be given in a URL: use New for that.
//
// # Delivery semantics
//
// Migrate creates, in Options.Schema (default "txmq", the outbox's schema), the table txmq_jobs
// (one row per batch: queue, batch id, body, deliveries, run_at, lease owner and token, created
// time), txmq_jobs_exclusive (the Exclusive locks), txmq_jobs_queues (fetch heartbeats) and a
// lease-token sequence. A row's state is derived from run_at and lease_token: unleased rows are
// ready once run_at has passed and delayed before; for a leased row run_at is the lease's end,
// and a lease that ran out is ready again. So "claimable" is exactly run_at <= now(), and one
// index on (queue, run_at) makes every claim a range scan of claimable rows only, whatever the
// table's size.
//
// Fetch runs one statement for all the queues of a request: per queue a LATERAL index scan with
// FOR UPDATE SKIP LOCKED limited to the queue's free slots (the queues share
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
// of the queue is leased in the whole cluster. Extend moves the lock with the lease; Ack, Retry
// and Drop delete it (and NOTIFY, waking nodes waiting for the queue); a lease that runs out
// releases it with the lease.
//
// Leases: Claim.Handle holds the row id and the claim's lease token. Extend, Ack (DELETE), Drop
// (DELETE) and Retry (UPDATE) match id, token and an unexpired lease; no match is an error
// wrapping core.ErrLeaseLost. The handle remembers a successful settle, so settling the same
// claim again is a no-op. Retry with a body rewrites it and restarts Deliveries at 0; with a
// nil body it is a retry in place.
//
// Concurrent Acks and Drops share one statement, and so do concurrent Extends (see Cost); each
// call returns its own claim's outcome, read from the returned (id, token) pairs. The statement
// runs detached from the callers' cancellation; a caller that stops waiting gets its context's
// error, and the handle still records a delete the statement made. A call whose context has
// already ended settles nothing and returns the context's error.
//
// Durability: claims, Acks, Drops and Extends commit with synchronous_commit = off, set for
// their own transaction only (Options.DurableSettles turns this off); Publish and Retry always
// wait for their commit to be flushed, and so do claims and extensions of Exclusive queues (a
// lock forgotten in a crash would let two nodes run the queue). A database crash may forget the
// last fraction of a second of claims and settles, which at-least-once delivery absorbs: a
// forgotten claim or extension is a lease that ran out, a forgotten Ack a batch delivered
// again.
//
// Wake-ups: Publish and Retry send pg_notify on the channel "txmq_jobs_<schema>" with the queue
// name as payload. Each Backend holds one LISTEN connection (opened by the first waiting Fetch,
// outside the pool, reopened with backoff) and wakes the fetches waiting on that queue, so an
// idle node picks up new work within milliseconds; a timer wakes it when a delayed batch or a
// lease is due.
//
// Abandoned queues: Fetch records per queue, at most once a minute, that it was fetched. A
// reaper (Reap; run when the Backend is made and every ReapInterval) finds queues with batches
// that no node has fetched within AbandonedAfter (default 7 days) and hands their batches older
// than that to Options.DeadLetters (reason ReasonAbandoned), deleting each only after the sink
// took it. Without a sink they are logged and counted (Stats) and left in place: never deleted
// silently.
//
// Behind PgBouncer: in transaction pooling mode PgBouncer lends a server connection for one transaction, so
// nothing of a session survives between statements. The Backend keeps none: every claim,
// settle, publish and reaper step is one statement, or one pipelined implicit transaction
// (the plan guard), or an explicit transaction; its settings (enable_seqscan,
// synchronous_commit) are transaction-local (set_config(..., true)), and Open does not set
// enable_seqscan per session there; migrations take a
// transaction-scoped advisory lock. Two things do not pass a transaction pooler, and
// Options.PgBouncer (URL parameter txmq_pgbouncer=true) handles both:
//
//   - pgx's default named prepared statements (PgBouncer before 1.21, or
//     max_prepared_statements = 0): the URL parameter also sets pgx's
//     default_query_exec_mode=exec (unnamed statements in one round trip) unless the URL names
//     another mode; describe_exec, whose two round trips may land on two server connections,
//     is refused.
//   - LISTEN: the Backend opens its LISTEN connection on Options.ListenURL (txmq_listen_url, a
//     direct, query-escaped postgres:// URL of the server itself) when given; otherwise it
//     never LISTENs and a waiting Fetch claims again every Options.PollInterval
//     (txmq_poll_interval, default 100 ms). NOTIFY itself is sent at commit and works through
//     the pooler.
//
// For example, with PgBouncer on port 6432 in front of PostgreSQL on 5432:
//
//	postgres://app@pgbouncer:6432/app?txmq_pgbouncer=true&txmq_listen_url=postgres%3A%2F%2Fapp%40db%3A5432%2Fapp
//
// Plans: every statement on the jobs table must be an index access at any table size and any
// statistics (an ANALYZE taken while the table was empty, or one saying a queue holds every
// row, would otherwise price a sequential scan and a sort below the index). The statements run
// with enable_seqscan off: on a pool whose sessions start with it (SessionPlanGuard; the pool
// Open makes, unless it goes through PgBouncer) each statement goes alone, one per claim round
// and one per group of settles; on any other pool (the app's, or through a transaction pooler)
// each is preceded by set_config('enable_seqscan', 'off', true) in the same pipelined implicit
// transaction, which never reaches the app's own statements. Both also set plan_cache_mode to
// force_generic_plan (for the session, or for the guarded transaction), so a connection plans
// each prepared statement once and reuses that plan, where Postgres' "auto" mode planned the
// claim anew at every execution. TestStatementPlans checks the custom and generic plans of
// every statement at several sizes, fresh and stale statistics.
//
// Without a ledger, the Backend answers message lookups (core.BatchInspector: the batches it
// still holds, ready, delayed, held behind their key, waiting to retry or running; never
// completed ones) by reading the queue's rows through the (queue, run_at) index in pages of
// 200, and cancels (core.BatchEditor) by replacing the body of, or deleting, a row no node
// holds under a live lease; deleting the head of an ordering key makes the key's next batch
// due, as an ack does. A lookup is an operator's tool: it reads the queue until it finds the
// message.
//
// Caller ids deduplicate (core.IDDeduper, txmq.QueueConfig.IDDedupWindow) exactly, with any
// window, per message id: a batch asking for it is stored in one transaction that first
// inserts its ids into txmq_job_ids (primary key (queue, id), expires_at = the database's
// clock plus the window; migration 0004). An id whose row has not expired refuses the publish:
// the transaction rolls back, nothing is stored, and the ids are named to the engine, which leaves
// those messages out. Two concurrent publishes of one id serialise on the primary key (ON
// CONFLICT), so exactly one stores it. An expired row is taken over in place. It works the
// same through PgBouncer (one ordinary transaction).
//
// Unique keys (core.UniqueKeeper, txmq.QueueConfig.Unique) work in every mode: txmq_jobs_unique
// (migration 0007) maps each key of a queue to the job row that took it, the md5 of the body
// it was stored with and a window end. A unique publish inserts the key's row or locks it (FOR
// UPDATE), reads the holder's job row by primary key (gone; claimed once; or rewritten by a
// retry: its body's md5 differs), deletes a debounce's unclaimed holder, stores the batch and
// moves the key, in one transaction. The reaper deletes the rows no batch holds any more.
//
// # Ordering
//
// The Backend enforces per-key order (core.KeyOrderer) for batches with a key
// (txmq.QueueConfig.Ordered). Rows keep the key in order_key; the sequence of a key is the
// rows' ids (bigserial), and only the first row of a queue's key is ever claimable: a row
// published behind others of its key is stored held (run_at 'infinity', counted as delayed;
// its own due time kept in due_at). Acking or dropping the first row makes the next one due
// (at its own due time, or now) in the same statement; a retry or a lost lease leaves the
// first row first. So the claim itself needs no guard: it stays the one index range scan per
// queue it is for unordered queues (TestStatementPlans covers every new statement). A keyed
// publish, ack and drop first take a transaction-scoped advisory lock on the queue and key
// (pg_advisory_xact_lock, in the same round trip), so a publish racing the ack of its key's
// first row never leaves a row held behind nothing (TestOrderedRace).
//
// Cost: a keyed publish is one round trip as before (plus the lock and an index probe of
// (queue, order_key, id)); keyed acks and drops are grouped like the others (see
// Options.SettleWindow) into one round trip that locks their keys and probes the same index
// for each key's next row. The index holds keyed rows only. The abandoned-queue reaper makes
// the next row of a key it reaped due. HoldsKey (core.KeyHolder, asked by a drain wrapper
// of its old backend) is one probe of the same index.
//
// # Limits
//
// A batch body is at most just under PostgreSQL's 1 GB value limit (MaxBatchBytes; the Backend
// implements core.SizeLimiter): a larger one is refused before it is sent, with an error
// wrapping core.ErrRejected, since PostgreSQL would end the connection. Options.Schema must
// match ^[A-Za-z_][A-Za-z0-9_]{0,49}$ because it also names the NOTIFY channel. One Fetch hands
// out at most Options.FetchLimit claims (default 1000) across its Unlimited queues when
// FetchRequest.Max is 0. Delays have no cap. Every statement is bounded by Options.QueryTimeout
// (default 10 s).
//
// # Errors
//
// Errors meaning the database is unreachable or refusing work (connection refused, reset or
// closed, a closed pool, timeouts, SQLSTATE classes 08 and 57P, 53300) wrap
// core.ErrBackendUnavailable; see Unavailable. Every statement is bounded by QueryTimeout, so
// an unreachable database fails a call within about that long. A value the database refuses
// permanently wraps core.ErrRejected and is not retried. A settle or extension of a lease that
// ran out, or was taken over, wraps core.ErrLeaseLost. New on a schema without the jobs tables
// (Migrate not run), a bad Options field or URL parameter wrap core.ErrInvalidConfig.
//
// # Cost
//
// Concurrent Acks and Drops share one DELETE ... USING unnest(ids, tokens) RETURNING id,
// lease_token statement, and concurrent Extends one UPDATE, the way a database group-commits: a
// settle that finds no statement of its kind running goes at once; otherwise it waits up to
// Options.SettleWindow (1 ms) or until Options.SettleBatch (100) are pending. With
// synchronous_commit = off (above), a settle does not wait for a WAL flush.
//
// Concurrent plain publishes (no DedupWindow, Unique or ordering Key; a body of at most 64 KiB)
// share one INSERT ... SELECT FROM unnest(...) with one NOTIFY per distinct queue: a publish
// that finds none running goes alone, with the one-row INSERT; otherwise it waits no longer
// than the statement it found running (nor SettleWindow). The Backend is a
// core.PublishGrouper, so a node's flush writes up to SettleBatch plain batches at a time:
// storing 10,000 one-message batches takes about 150 statements rather than 10,000.
//
// Id dedup: batches without caller ids run the plain one-statement INSERT, untouched. A batch
// with them costs one transaction (BEGIN, an INSERT ... ON CONFLICT of its ids, the INSERT of
// the batch, COMMIT) and one row per id in txmq_job_ids, which the reaper deletes once expired
// (pages of ReapBatch by the expires_at index, every ReapInterval: the table holds about one
// ReapInterval plus one window of ids).
//
// While idle, a node runs one claim statement per FetchRequest.Wait (one index probe per queue:
// cheap with 1,000 queues) and holds one LISTEN connection per Backend; the reaper runs once
// every ReapInterval (1 h), and heartbeats are one write per fetched queue per minute at most.
package sqljobs
