// Package mysql is the txmq backend that keeps batches in a jobs table of the app's own MySQL
// 8 or MariaDB 10.6+ database (database/sql with github.com/go-sql-driver/mysql), so an app
// with only MySQL gets durable, clustered delivery with no other server. It means what the
// PostgreSQL SQL jobs backend (package sqljobs) means by every queue setting; the parity
// suite checks it against MariaDB. Every node (process) opens a Backend on the same database.
//
//	if err := mysql.Migrate(ctx, db, nil); err != nil { ... }
//	be, err := mysql.New(ctx, db, &mysql.Options{DeadLetters: store})
//	node, err := txmq.NewNode(be, nil)
//
// or, by setting, TXMQ_BACKEND=mysql://user:pass@host:3306/app (see Open), which opens a
// *sql.DB and migrates. The module is separate from txmq's, so an app on PostgreSQL requires
// neither this package nor the MySQL driver.
//
// # URL and parameters
//
// Importing the package registers the mysql:// and mariadb:// schemes:
//
//	mysql://user:pass@host:3306/app?tls=true&txmq_poll_interval=50ms
//
// The user, password, host (port 3306 when omitted) and database make the driver's
// connection. Parameters starting with txmq_ (matched without regard to case) set Options and
// are removed; the others are the driver's DSN parameters (tls, timeout, readTimeout,
// writeTimeout, charset, maxAllowedPacket, ...):
//
//	txmq_schema           Options.Schema (a database; default the URL's)
//	txmq_migrate          run Migrate first (true or false, default true)
//	txmq_lease            accepted (a Go duration) and ignored: the node's lease decides
//	txmq_fetch_limit      accepted (a positive number) and ignored: the node's FetchMax decides
//	txmq_query_timeout    Options.QueryTimeout (a Go duration)
//	txmq_abandoned_after  Options.AbandonedAfter (a Go duration)
//	txmq_reap_interval    Options.ReapInterval (a Go duration; negative turns the reaper off)
//	txmq_poll_interval    Options.PollInterval (a Go duration)
//
// An unknown txmq_ parameter, a URL without a host or a database, or a driver parameter the
// driver refuses is an error wrapping core.ErrInvalidConfig; errors never show the password.
// Open creates its own *sql.DB, closed by Backend.Close.
//
// # Delivery semantics
//
// Migrate creates, in Options.Schema (default the connection's database), the table txmq_jobs
// (one row per batch: queue, batch id, body, deliveries, run_at, lease owner and token,
// created time, ordering key), txmq_jobs_exclusive (the Exclusive locks), txmq_job_keys (the
// ordering keys' locks), txmq_jobs_queues (fetch heartbeats), txmq_job_ids (dedup ids) and
// txmq_jobs_fair (fair queues' turns; migration 0003 also adds txmq_jobs.fair_key),
// and records its version in txmq_migrations. Times are BIGINT microseconds on the
// database's clock (UTC_TIMESTAMP(6)), so neither the session's time zone nor the DSN's
// parseTime or loc can shift them. A row's state is derived from run_at and lease_token as in
// sqljobs: "claimable" is exactly run_at <= now, one range scan of the (queue, run_at) index.
//
// Fetch runs one transaction: a UNION ALL of one SELECT ... FOR UPDATE SKIP LOCKED per
// queue, each an index range scan limited to the queue's free slots; the rows the request's
// Max takes, round-robin across the queues; for an Exclusive queue's row, an UPDATE of the
// queue's lock row that succeeds only when its lease ran out; then one UPDATE that gives the
// claimed rows a new random lease token, deliveries+1 and run_at = the lease's end. When it
// claims nothing, one more statement finds when the next row of those queues becomes
// claimable, for the wait timer. A delayed publish stores run_at = the database's clock plus
// the batch's delay, never the app's due time.
//
// Queues with a cluster-wide limit (txmq.QueueConfig.ClusterLimit, core.ClusterLimiter): the
// claim transaction locks the queue's row of txmq_jobs_exclusive (FOR UPDATE) before picking,
// counts the queue's live leases and picks at most the limit minus that (clusterlimit.go).
// Fair queues (core.FairSharer): the claim locks the queue's turn row (txmq_jobs_fair), lists
// the keys with a ready row from the one after the last served and takes their first ready
// rows round-robin, passing over keys at their KeyLimit (fair.go); on a queue both Fair and
// Prioritized each key's pick ranks its rows by run_at minus lead (core.FairPrioritizer).
//
// Exclusive queues: each has one row in txmq_jobs_exclusive, made the first time a Backend
// claims the queue. A claim takes it (UPDATE ... WHERE lease_until <= now: the row lock
// serialises claimers on every node) in the claim's transaction, so at most one batch of the
// queue is leased in the whole cluster. Extend moves the lock with the lease; Ack, Retry and
// Drop release it; a lease that runs out releases it with the lease.
//
// Leases: Claim.Handle holds the row id and the claim's lease token. Extend, Ack, Drop and
// Retry match id, token and an unexpired lease; no match is an error wrapping
// core.ErrLeaseLost. Settling the same claim again is a no-op. Retry with a body rewrites it
// and restarts Deliveries at 0; with a nil body it is a retry in place. Concurrent Acks and
// Drops share one transaction, and so do concurrent Extends (package core/groupcommit); each
// call returns its own claim's outcome. Concurrent plain publishes (no DedupWindow, Unique or
// ordering Key; small bodies) share one multi-row INSERT, each returning its own batch's
// outcome; a lone one goes at once (see Options.SettleWindow).
//
// Durability: every statement commits as the server is configured
// (innodb_flush_log_at_trx_commit); MySQL has no per-transaction synchronous_commit, so
// unlike sqljobs claims and settles cannot skip the log flush.
//
// Wake-ups: MySQL has no LISTEN/NOTIFY. A publish, retry or release through a Backend wakes
// that Backend's own waiting fetches of the queue at once; every waiting fetch also claims
// again each Options.PollInterval (default 100 ms), so a batch published by another process is
// picked up within about one PollInterval, and a timer wakes it when a delayed batch or a
// lease is due.
//
// Abandoned queues: Fetch records per queue, at most once a minute, that it was fetched. A
// reaper (Reap; run when the Backend is made and every ReapInterval) hands batches of queues
// no node fetched within AbandonedAfter (default 7 days) to Options.DeadLetters (reason
// ReasonAbandoned), deleting each only after the sink took it. Without a sink they are
// logged and counted (Stats) and left in place: never deleted silently.
//
// Without a ledger, the Backend answers message lookups (core.BatchInspector) by reading the
// queue's rows through the claim index in pages of 200, and cancels (core.BatchEditor) by
// replacing the body of, or deleting, a row no node holds under a live lease.
//
// Caller ids deduplicate (core.IDDeduper) exactly, with any window: a batch asking for it is
// stored in one transaction that first takes over its expired id rows and inserts the
// missing ones in txmq_job_ids, each marked with the publish's random token; an id whose row
// another publish holds refuses the publish (nothing is stored, the ids are named). Two
// concurrent publishes of one id serialise on the primary key.
//
// Unique keys (core.UniqueKeeper, txmq.QueueConfig.Unique) work in every mode, as in sqljobs:
// txmq_jobs_unique (migration 0003) maps each key of a queue to the job row that took it; a
// unique publish makes or locks the key's row (INSERT ... ON DUPLICATE KEY UPDATE), judges the
// holder's row by primary key (gone; claimed once; or rewritten by a retry, told by
// SHA2(body, 256) against the sum stored with the key), and stores the batch and moves the key
// in the same READ COMMITTED transaction. The reaper deletes the rows no batch holds any more.
//
// # Ordering
//
// The Backend enforces per-key order (core.KeyOrderer) for batches with a key, as sqljobs
// does: only the first row of a queue's key is ever claimable; a row published behind others
// of its key is stored held (run_at the largest BIGINT, counted as delayed; its own due time
// kept in due_at). Acking or dropping the first row makes the next one due in the same
// transaction; a retry or a lost lease leaves the first row first. MySQL has no
// transaction-scoped advisory lock, so a keyed publish, ack, drop and cancel first lock the
// key's row in txmq_job_keys (INSERT ... ON DUPLICATE KEY UPDATE), which serialises them.
// HoldsKey (core.KeyHolder) is one probe of the (queue, order_key, id) index.
//
// # Limits
//
// A batch body is at most the server's max_allowed_packet (read by New; MariaDB's default 16
// MiB, MySQL 8's 64 MiB) less 64 KiB (MaxBatchBytes; the Backend implements
// core.SizeLimiter, so nodes cut batches below it): a larger one is refused before it is
// sent, with an error wrapping core.ErrRejected. Queue names, batch ids and message ids are at
// most 255 bytes. Options.Schema must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$. Delays have no cap.
// Every statement is bounded by Options.QueryTimeout (default 10 s). The connections of a
// mysql:// URL set innodb_lock_wait_timeout to half of it (at least 1 s; a URL parameter of
// that name overrides it), so that the server ends a lock wait before the caller gives up:
// the driver cannot stop a statement the server is running, and one left waiting would hold
// its transaction's locks for the server's default 50 s. A *sql.DB passed to New should set
// it likewise (the DSN parameter innodb_lock_wait_timeout).
//
// Every statement on the jobs table names its index (FORCE INDEX) or goes by primary key, so
// it plans as an index access whatever the table's size and statistics (TestStatementPlans
// checks each with EXPLAIN). Tested on MariaDB 10.11; MySQL 8 uses the same SQL (locking
// clauses in UNION parts need 8.0.31 or later).
//
// # Errors
//
// Errors meaning the database is unreachable or refusing work (connection refused, reset or
// closed, timeouts, too many connections, shutdown, a killed connection or statement, a lock
// wait timeout, a read-only server) wrap core.ErrBackendUnavailable; see Unavailable. A value
// the database refuses permanently (over max_allowed_packet, too long, invalid) wraps
// core.ErrRejected and is not retried. A settle or extension of a lease that ran out, or was
// taken over, wraps core.ErrLeaseLost. New on a database without the jobs tables (Migrate not
// run), a bad Options field or URL parameter wrap core.ErrInvalidConfig. A deadlock victim
// (or a lock wait that timed out) is run again, up to five runs in all within QueryTimeout.
//
// # Cost
//
// A publish is one INSERT (a keyed one a transaction of three statements: the key's lock,
// a probe of the key's first row, the INSERT). A claim is one transaction of two statements
// (the pick and the lease UPDATE, plus one per Exclusive queue); an idle claim is the pick
// and the next-due query. A lone Ack or Drop is one DELETE; concurrent ones, and those of
// ordered or Exclusive batches, share one transaction that locks the rows by primary key.
// An Extend is a transaction of a locking SELECT and an UPDATE, shared by concurrent ones.
//
// While idle, a node runs one claim per PollInterval per waiting Fetch (one index probe per
// queue); the reaper runs once every ReapInterval (1 h), and heartbeats are one write per
// fetched queue per minute at most.
package mysql
