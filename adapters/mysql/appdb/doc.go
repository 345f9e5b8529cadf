// Package appdb keeps txmq's outbox and dead letters in the app's own MySQL 8 or MariaDB
// 10.6+ database (github.com/go-sql-driver/mysql), so that a message is published if and
// only if the app's database/sql transaction that made it commits.
//
// Import it (blank) and set TXMQ_DATABASE_URL=mysql://user:password@host:3306/app: txmq.Open
// then migrates the tables (in the database TXMQ_SCHEMA names, default "txmq", created when
// missing; MySQL transactions span the databases of one server) and opens an outbox.Store on
// this package's Dialect. Publish inside the app's transactions with Store.RunInSQLTx (or
// WithSQLTx on a transaction the app begins).
//
// What differs from PostgreSQL:
//
//   - Wake-up: MySQL has no NOTIFY. RunInSQLTx wakes the relay of its own process at
//     commit (published within milliseconds); the relays of other processes look for due rows
//     every outbox.Options.PollInterval (default 250 ms), which bounds the pickup of rows
//     written with WithSQLTx or by another process.
//   - Staging: each publish writes its rows into the app's transaction at once (one INSERT),
//     so savepoints made any way (SAVEPOINT statements on the *sql.Tx too) keep or discard
//     them with the business rows; publishes of one transaction are not coalesced.
//   - The store's claims run in READ COMMITTED with FOR UPDATE SKIP LOCKED, so a page being
//     published never holds gap locks that would block the app's inserts.
//   - The ledger needs PostgreSQL: txmq.Open refuses Config.Ledger. So do RunInTx, WithTx and
//     Savepoint (pgx transactions): they return an error wrapping outbox.ErrNeedsPostgres.
//
// Pauses, schedule ticks, the shared rate limit and node heartbeats live in the same database
// (migration 0002; the Dialect implements outbox.ControlDialect), and mean across the nodes of
// the app what they mean on PostgreSQL; txmq.Open gives them to the node:
//
//   - Pauses (txmq_paused): a queue paused by App.Pause, `txmq queue pause` or the dashboard is
//     started by no node once it has read the mark (NodeOptions.PauseCheck).
//   - Ticks (txmq_schedule_ticks, txmq_schedules): a tick is claimed by a plain INSERT whose
//     primary key (schedule, tick) admits it once, in a READ COMMITTED transaction that also
//     writes the tick's messages as outbox rows and the schedule's last tick: each tick is
//     published once cluster-wide, and a node dying after its claim loses nothing. Two nodes
//     waiting for a claim that rolls back make InnoDB pick one as a deadlock victim: it runs
//     again and finds the tick claimed.
//   - Limits (txmq_rate_buckets): one token bucket row per queue, refilled and taken from in
//     one INSERT ... ON DUPLICATE KEY UPDATE and read back in the same transaction: the limit
//     holds across nodes. The refill reads the clock at the statement's start, so a take that
//     waited for the row's lock refills nothing for its wait (the limit holds; a contended
//     bucket may lend a little less than its rate).
//   - Nodes (txmq_nodes): one heartbeat row per node, for the dashboard and `txmq nodes`.
//
// Their calls run through a core/sqlcall Runner: bounded, run again when InnoDB picks one as a
// deadlock victim or its lock wait times out, and an unreachable database wrapped in
// core.ErrBackendUnavailable.
//   - The dead-letter insert reads the driver's changed-rows count: the connection must not
//     set clientFoundRows (Config turns it off).
package appdb
