// Package sqlite is the txmq backend that keeps batches in a jobs table of a SQLite database
// file: durable, clustered across the processes of one machine, with no server. It means what
// the PostgreSQL SQL jobs backend (package sqljobs) means by every queue setting; the parity
// suite checks it. Every process opens a Backend on the same file.
//
//	db, err := sqlite.OpenDB("app.db", nil) // WAL, busy_timeout, synchronous=FULL
//	if err := sqlite.Migrate(ctx, db, nil); err != nil { ... }
//	be, err := sqlite.New(ctx, db, &sqlite.Options{DeadLetters: store})
//	node, err := txmq.NewNode(be, nil)
//
// or, by setting, TXMQ_BACKEND=sqlite://app.db (see Open), which opens the file and migrates.
// The module is separate from txmq's, so an app on PostgreSQL requires neither this package
// nor a SQLite driver. The outbox and dead letters can live in the same file (package
// github.com/txmq/txmq/adapters/sqlite/appdb, TXMQ_DATABASE_URL=sqlite://app.db), so that
// an app publishes inside its own transactions on the file.
//
// The driver is modernc.org/sqlite: SQLite translated to Go, so the module builds with
// CGO_ENABLED=0, cross-compiles like any Go code and runs the real SQLite (the same file
// format, locking and WAL as the C library), at some cost in speed against the C library.
// github.com/mattn/go-sqlite3 is the C library itself (faster) but needs cgo and a C
// toolchain on every machine that builds the app; github.com/ncruces/go-sqlite3 runs SQLite
// compiled to WebAssembly in wazero (no cgo either), a younger stack with a runtime of its
// own. txmq picks the one that keeps `go build` plain, as the rest of txmq does.
//
// # URL and parameters
//
// Importing the package registers the sqlite:// and sqlite3:// schemes. The URL names a file:
//
//	sqlite://app.db                    app.db in the working directory
//	sqlite://data/jobs.db              data/jobs.db, relative to the working directory
//	sqlite:///var/lib/app/jobs.db      an absolute path: three slashes
//	sqlite:app.db                      the same as sqlite://app.db
//
// An in-memory database (sqlite://:memory:, file::memory:, mode=memory) is refused with an
// error wrapping core.ErrInvalidConfig: it is neither durable nor shared between processes
// (use memory:// for a throwaway queue). Parameters starting with txmq_ (matched without
// regard to case) set Options and are removed; those starting with _ are modernc.org/sqlite's
// DSN parameters (_pragma=synchronous(NORMAL), ...), which override the defaults OpenDB sets
// (busy_timeout, journal_mode=WAL, synchronous=FULL):
//
//	txmq_migrate          run Migrate first (true or false, default true)
//	txmq_lease            accepted (a Go duration) and ignored: the node's lease decides
//	txmq_fetch_limit      accepted (a positive number) and ignored: the node's FetchMax decides
//	txmq_query_timeout    Options.QueryTimeout (a Go duration)
//	txmq_busy_timeout     Options.BusyTimeout (a Go duration)
//	txmq_abandoned_after  Options.AbandonedAfter (a Go duration)
//	txmq_reap_interval    Options.ReapInterval (a Go duration; negative turns the reaper off)
//	txmq_poll_interval    Options.PollInterval (a Go duration)
//
// An unknown txmq_ parameter, txmq_schema (SQLite has no schemas: use a file per namespace),
// another parameter, a user or password, or a URL without a file is an error wrapping
// core.ErrInvalidConfig. Open creates its own *sql.DB, closed by Backend.Close.
//
// # Delivery semantics
//
// Migrate turns the file to WAL mode (readers never wait for the writer; it stays with the
// file) and creates, in one transaction, the table txmq_jobs (one row per batch: queue, batch
// id, body, deliveries, run_at, lease owner and token, created time, ordering key, priority
// and lead; row ids never reused), txmq_jobs_exclusive (the Exclusive locks),
// txmq_jobs_queues (fetch heartbeats) and txmq_job_ids (dedup ids), and records its versions
// in txmq_migrations (New refuses a file that lacks one).
// Times are INTEGER microseconds on the machine's clock: every process on a SQLite file runs
// on the machine that holds it (SQLite on a network file system is not safe, and WAL needs
// shared memory), so they share one clock. A row's state is derived from run_at and
// lease_token as in sqljobs: "claimable" is exactly run_at <= now, one range scan of the
// (queue, run_at) index.
//
// SQLite has one writer at a time per file. Every claim, grouped settle, keyed or dedup
// publish, cancel and reaper page is one BEGIN IMMEDIATE transaction, which takes the write
// lock when it begins, so it never fails half-way for a lock and needs no row locks: the write
// lock serialises it with every other writer in every process. The writers of all of a
// process's Backends on the file queue in the process, first come, first served; then one of
// them at a time queues with the other processes at an advisory lock (flock) on the file
// beside the database (app.db-txmqlock, LockSuffix), which wakes the next one as soon as
// the holder lets go, where SQLite's own lock makes a waiter sleep and retry (and lose to
// newcomers); other writers on the file (the app's own) meet txmq at SQLite's lock, waiting up
// to busy_timeout (Options.BusyTimeout, default 5 s).
//
// Fetch first reads, without a lock (a WAL read), the smallest run_at of its queues, one
// index probe each: when nothing is due it takes no write lock at all and waits. Otherwise
// one transaction reads each queue's due rows (an index range scan limited to the queue's
// free slots), takes the rows the request's Max allows, round-robin across the queues, takes
// an Exclusive queue's lock row when its lease ran out, and gives the claimed rows a new
// random lease token, deliveries+1 and run_at = the lease's end. A delayed publish stores
// run_at = now plus the batch's delay.
//
// Exclusive queues: each has one row in txmq_jobs_exclusive, made the first time a Backend
// claims the queue, taken in the claim's transaction when its lease_until has passed, so at
// most one batch of the queue is leased on the whole file. Extend moves the lock with the
// lease; Ack, Retry and Drop release it; a lease that runs out releases it with the lease.
//
// Leases: Claim.Handle holds the row id and the claim's lease token. Extend, Ack, Drop and
// Retry match id, token and an unexpired lease; no match is an error wrapping
// core.ErrLeaseLost. Settling the same claim again is a no-op. Retry with a body rewrites it
// and restarts Deliveries at 0; with a nil body it is a retry in place. Concurrent Acks and
// Drops share one transaction, and so do concurrent Extends (package core/groupcommit); each
// call returns its own claim's outcome.
//
// Durability: OpenDB (and so Open) sets synchronous=FULL: every commit is on disk before it
// returns, so a publish or ack survives a power cut, not only a crash of the process. With
// _pragma=synchronous(NORMAL) a commit survives a crash of the process but the last ones may
// roll back on a power cut (the file stays consistent); writes are about twice as fast.
//
// Wake-ups: SQLite has no LISTEN/NOTIFY. A publish, retry or release through a Backend wakes
// that Backend's own waiting fetches of the queue at once; every waiting fetch also looks
// again each Options.PollInterval (default 100 ms; a lock-free read when nothing is due), so a
// batch published by another process is picked up within about one PollInterval, and a timer
// wakes it when a delayed batch or a lease is due.
//
// Abandoned queues: Fetch records per queue, at most once a minute, that it was fetched. A
// reaper (Reap; run when the Backend is made and every ReapInterval) hands batches of queues
// no node fetched within AbandonedAfter (default 7 days) to Options.DeadLetters (reason
// ReasonAbandoned), deleting each only after the sink took it. Without a sink they are
// logged and counted (Stats) and left in place: never deleted silently.
//
// Without a ledger, the Backend answers message lookups (core.BatchInspector) by reading the
// queue's rows through the claim index in pages of 200, and cancels and expedites
// (core.BatchEditor, core.BatchExpediter) by editing a row no node holds under a live lease.
// Caller ids deduplicate (core.IDDeduper) exactly, with any window, in the transaction that
// stores the batch; an id another publish holds refuses the publish (nothing is stored, the
// ids are named).
//
// Unique keys (core.UniqueKeeper, txmq.QueueConfig.Unique) work in every mode, as in sqljobs:
// txmq_jobs_unique (migration 0002) maps each key of a queue to the job row that took it, read,
// judged and moved in the BEGIN IMMEDIATE transaction that stores the batch; a retry's rewrite
// is told by the SHA-256 of the body stored with the key.
//
// # Ordering
//
// The Backend enforces per-key order (core.KeyOrderer) for batches with a key, as sqljobs
// does: only the first row of a queue's key is ever claimable; a row published behind others
// of its key is stored held (run_at the largest INTEGER, counted as delayed; its own due time
// kept in due_at). Acking or dropping the first row makes the next one due in the same
// transaction; a retry or a lost lease leaves the first row first. A keyed publish, ack, drop
// and cancel run in BEGIN IMMEDIATE transactions, which the write lock serialises: SQLite
// needs no key lock. HoldsKey (core.KeyHolder) is one probe of the (queue, order_key, id)
// index. The fetch order (due time, or due time minus lead on a prioritized queue, then
// round-robin across queues) lives in one place, Backend.pick; a fair queue's (round-robin
// across its keys) in pickFair.
//
// Priorities: the Backend honours them (core.Prioritizer) as sqljobs and mysql do: a batch's
// priority and lead are stored with its row (columns priority and lead_us) and never change,
// so retries, leases, expired leases, expedites and a key's promotion keep them. A claim of a
// prioritized queue reads its ready rows one priority at a time (ten scans of the covering
// index (queue, priority, run_at, id, lead_us), each at most the queue's free slots), ranks
// them by run_at minus lead, and reads the body of the rows it takes by primary key; never
// early (run_at <= now as for every row). Per-key order comes first: a held row is not ready.
// See priority.go.
//
// Fair share by key: the Backend shares a fair queue's claims round-robin across its fairness keys
// (core.FairSharer), as sqljobs and mysql do, and ranks each key's batches by run_at minus
// lead on a queue also Prioritized (core.FairPrioritizer). A batch's key is stored with its
// row (column fair_key, migration 0004) by every publish path and never changes. The claim,
// inside its BEGIN IMMEDIATE transaction (so fair claims of all processes take turns with no
// row lock), reads the queue's turn (txmq_jobs_fair: the last key served), walks the keys from
// the one after it (one probe of the (queue, fair_key, run_at, id, lead_us) index per key,
// which also tells whether the key has a ready row; at most 1,000 keys per claim), reads the
// chosen keys' first ready rows from that index, takes them one per key per round and
// records the last key claimed as the turn. A ready batch therefore waits at most one claim
// per other key with ready batches. Ordering keys come first (only a key's head is ready),
// then fairness, then priority. See fair.go.
//
// # Limits
//
// Cluster-wide limits: the Backend enforces a queue's ClusterLimit (core.ClusterLimiter):
// the claim's BEGIN IMMEDIATE transaction, which holds the file's write lock, counts the queue's
// unexpired leases and picks at most the room left, so no two claims of any process can both
// take the last slot; a settled or expired lease gives its slot back by itself. See
// clusterlimit.go. A fair queue's KeyLimit is enforced the same way: its claim counts each
// key's unexpired leases and passes over the keys at their limit (fair.go).
//
// A batch body is at most MaxBatchBytes (SQLite's default SQLITE_MAX_LENGTH, 1e9 bytes, less
// 64 KiB; the Backend implements core.SizeLimiter, so nodes cut batches below it): a larger
// one is refused before it is sent, with an error wrapping core.ErrRejected. Every statement
// is bounded by Options.QueryTimeout (default 10 s), the wait for the write lock included.
// One file has one writer at a time: writes of all processes on the file take turns, so
// throughput does not grow with nodes the way it does on a database server. All processes
// must run on the machine that holds the file. Delays have no cap.
//
// Every statement on the jobs table names its index (INDEXED BY, which makes SQLite refuse
// to prepare it rather than plan a scan) or goes by primary key (TestStatementPlans checks
// each with EXPLAIN QUERY PLAN at 0 and 10,000 rows: no SCAN of a txmq table, no temporary
// B-tree for an ORDER BY).
//
// # Errors
//
// Errors meaning the file cannot be used for a reason that should pass (another writer held
// the lock past busy_timeout, SQLITE_BUSY or SQLITE_LOCKED; a disk error or a full disk,
// SQLITE_IOERR or SQLITE_FULL; a file that cannot be opened or written; a statement
// interrupted by QueryTimeout; a closed handle) wrap core.ErrBackendUnavailable; see
// Unavailable. A value SQLite refuses permanently (SQLITE_TOOBIG) wraps core.ErrRejected and
// is not retried. A settle or extension of a lease that ran out, or was taken over, wraps
// core.ErrLeaseLost. New on a file without the jobs tables (Migrate not run), a bad Options
// field or URL parameter wrap core.ErrInvalidConfig.
//
// # Cost
//
// A publish is one INSERT; concurrent plain publishes (no ordering key, DedupWindow or
// Unique; bodies up to 64 KiB) share one multi-row INSERT, so one commit and one turn of the
// write lock, grouped as settles are (Options.SettleWindow and SettleBatch; the Backend
// implements core.PublishGrouper, so a node's flush writes up to SettleBatch plain batches at
// a time); a keyed, dedup or unique one is a transaction of a few statements. A claim is
// a lock-free index probe per queue, then, when something is due, one transaction of two
// statements (the pick and the lease UPDATE, plus one per Exclusive queue, and one reading
// the taken rows of prioritized and fair queues, whose pick reads ten index ranges instead of
// one, or one probe per key walked and one range per key taken). Every row has two more
// index entries: one for priorities and one for fair share by key (rows of prioritized
// queues one more, in a partial index). A lone Ack or Drop
// is one DELETE; concurrent ones, and those of ordered or Exclusive batches, share one
// transaction. An Extend is a transaction of a read and an UPDATE, shared by concurrent ones.
// Every commit waits for the disk (synchronous=FULL, an fsync of the WAL).
//
// While idle, a node runs one lock-free index probe per queue per PollInterval per waiting
// Fetch; the reaper runs once every ReapInterval (1 h), and heartbeats are one write per
// fetched queue per minute at most.
package sqlite
