// Package appdb keeps txmq's outbox and dead letters in the app's own SQLite database file
// (modernc.org/sqlite, no cgo), so that a message is published if and only if the app's
// database/sql transaction that made it commits.
//
// Import it (blank) and set TXMQ_DATABASE_URL=sqlite://app.db (sqlite3://, sqlite:app.db and
// sqlite:///abs/path.db too): txmq.Open then opens the file (OpenDB), migrates the tables
// txmq_outbox and txmq_dead_letters into it, and opens an outbox.Store on this package's
// Dialect. Publish inside the app's transactions with Store.RunInSQLTx (savepoints:
// SQLSavepoint or a nested RunInSQLTx), or WithSQLTx on a transaction the app begins. The jobs
// may live in the same file (TXMQ_BACKEND=sqlite://app.db, package adapters/sqlite) or in any
// other backend. Without this import, a sqlite:// TXMQ_DATABASE_URL is refused with an error
// naming it.
//
// What differs from PostgreSQL:
//
//   - Locking: SQLite has one writer per file and no row locks. OpenDB opens the handle with
//     _txlock=immediate, so every transaction the app begins (RunInSQLTx's included) takes
//     the write lock at BEGIN and never fails half-way with SQLITE_BUSY_SNAPSHOT; writers wait
//     for each other up to busy_timeout (5 s). The store's own transactions are short BEGIN
//     IMMEDIATE ones, run again (three times at most) after lock contention; the errors are
//     sorted in one place (errors.go), a file locked past busy_timeout, unreadable or full
//     wrapping core.ErrBackendUnavailable.
//   - Claims: there is no FOR UPDATE SKIP LOCKED. The relay and the sweep lease a page of due
//     rows with one UPDATE ... RETURNING (a claim token and a next-attempt time at the lease's
//     end: Options.PublishTimeout plus 20 s), publish it with no lock held, and settle it in a
//     second transaction; rows of a process that died are taken over when the lease ends. No
//     publish ever holds the file's write lock, so a backend in the same file can write.
//   - Handoffs (batches the backend refused at flush time) never wait for the app's own open
//     transaction, which holds the file's only writer: one made inside a transaction of the
//     store is written into it (RunInSQLTx writes it again if the transaction or a savepoint
//     rolls back; WithSQLTx logs that a rollback loses it), any other waits for the writer
//     (at most 250 ms while a RunInSQLTx is open in the process or the app uses WithSQLTx)
//     and then stays queued in memory, in order, until the writer is free or the store's next
//     staged publish writes it first (outbox.SingleWriterDialect). A crash in that window
//     loses it, as it loses the node's publish buffer.
//   - Wake-up: SQLite has no NOTIFY. RunInSQLTx wakes the relay of its own process at commit
//     (published within milliseconds); the relays of other processes look for due rows every
//     outbox.Options.PollInterval (default 250 ms, a read without a lock when nothing is due),
//     which bounds the pickup of rows written with WithSQLTx or by another process.
//   - Staging: each publish writes its rows into the app's transaction at once (one INSERT),
//     so savepoints made any way keep or discard them with the business rows.
//   - Replay: a dead letter is marked "being replayed" (until its publish's deadline) instead
//     of being locked while it is published; a concurrent replay of it is refused with
//     outbox.ErrAlreadyReplayed.
//   - Files: an in-memory database is refused (it is neither durable nor shared), and so is
//     a file that does not exist when nothing migrates it (txmq dlq, txmq status,
//     TXMQ_MIGRATE off): SQLite would create it empty.
//   - Schemas: SQLite has none; the tables live in the file's main database, and a schema
//     other than "", "main" or "txmq" (TXMQ_SCHEMA) is refused. Use a file per namespace.
//   - Control tables (migration 0002, control.go): pauses, schedule ticks, the shared rate
//     limit and node heartbeats are kept in the file (outbox.ControlDialect), so every process
//     on it sees one pause, claims each schedule tick once (its primary key, in a transaction
//     holding the file's writer that also stages the tick's messages) and takes from one rate
//     bucket (read, refilled and taken in one write transaction); txmq.Open gives them to the
//     node. The ledger needs PostgreSQL: txmq.Open refuses Config.Ledger, and RunInTx, WithTx
//     and Savepoint (pgx) return an error wrapping outbox.ErrNeedsPostgres that names SQLite.
//     The outbox inspection queries (ListOutbox, Backlog, DeadLetterCounts) run here.
//   - Times are INTEGER microseconds on the machine's clock: every process on a SQLite file
//     runs on the machine that holds it (SQLite on a network file system is not safe).
package appdb
