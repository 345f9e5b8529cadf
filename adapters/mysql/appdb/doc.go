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
//   - Pauses, schedule ticks, the shared rate limit, node heartbeats, the ledger and the
//     outbox inspection queries need PostgreSQL: txmq.Open refuses Config.Ledger, and leaves
//     the others unset (a node then keeps pauses, ticks and rate limits to itself); the
//     Store's methods return an error wrapping outbox.ErrNeedsPostgres.
//   - The dead-letter insert reads the driver's changed-rows count: the connection must not
//     set clientFoundRows (Config turns it off).
package appdb
