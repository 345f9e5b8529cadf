// Package outbox is txmq's transactional outbox and dead-letter store in the app's PostgreSQL
// database (github.com/jackc/pgx/v5).
//
// # Tables
//
// Migrate creates, in Options.Schema (default "txmq"), the tables txmq_outbox and
// txmq_dead_letters, tracked by internal/pgmigrate under the component "outbox", and the tables
// of the Store's other jobs, each behind a type of its own that the Store hands out on the
// same pool and schema:
//
//   - Store.Pauses (type Pauses, table txmq_paused): the queue pause marks that App.Pause,
//     `txmq queue pause` and the dashboard write and every node reads (txmq.PauseSource).
//   - Store.Ticks (type Ticks, tables txmq_schedule_ticks and txmq_schedules): each schedule
//     tick claimed once cluster-wide, in the transaction that stages its messages
//     (txmq.TickClaimer).
//   - Store.Limits (type Limits, table txmq_rate_buckets): the token buckets of rate-limited
//     queues, shared by every node (core.Limiter).
//
// txmq.Open gives them to the node (NodeOptions.Pauses, Ticks and Limiter, and Store.Nodes as
// NodeOptions.Heartbeats). A nil Store (an app without a database) hands out nil ones, whose
// methods return ErrNoDatabase. On another database (NewWithDialect) they are the same types
// on that database's tables when its Dialect keeps them (ControlDialect; MySQL/MariaDB's
// does), else nil.
//
// # Publishing inside a transaction
//
// A Store joins the engine's publish routing to an app transaction in two ways:
//
//   - Store.RunInTx begins a pgx transaction and calls fn with a context carrying it. Publishes
//     on Require/Try queues made with that context are staged in memory; just before COMMIT they
//     are deduplicated and cut into batches (core.Batches) and inserted as outbox rows in one
//     statement, so an insert error rolls the business transaction back. After COMMIT RunInTx
//     hands its rows to the store's after-commit publishers, runs the after-commit callbacks
//     (Never queues) and returns, without waiting for the backend: the publishers publish the
//     rows within milliseconds and delete them. A row whose publish fails (or that they could
//     not take: queue full, store closed, crash) stays for the recovery sweep; RunInTx does not
//     report it (the transaction committed). Store.WaitIdle waits for the publishers. Staged
//     messages and callbacks follow savepoints: rolling one back discards those staged inside
//     it (and inside the savepoints nested in it); releasing it merges them into the parent.
//     Savepoints made with tx.Begin on the tx given to fn (pgx.BeginFunc, any depth), nested
//     RunInTx calls, Store.Savepoint and SAVEPOINT statements run alone through tx.Exec are
//     all followed; see RunInTx for the savepoints that are not.
//   - Store.WithTx (pgx.Tx) and Store.WithSQLTx (*sql.Tx) join a transaction the app manages.
//     Each publish writes its rows at once inside that transaction, marked due now, and sends a
//     NOTIFY; the relay started by Store.Start publishes them within milliseconds of COMMIT.
//     Such a transaction cannot report its commit, so Never queues are refused inside it.
//     The rows are in the transaction at once, so every savepoint of it, made with pgx's
//     tx.Begin or with SQL text (the only way with database/sql), discards them when it is
//     rolled back, as the database does any row.
//
// # Row life cycle
//
// A row's next_attempt_at says who owns it:
//
//   - NULL: rows inserted by RunInTx (published by the committing process right after commit,
//     which leases them for the publish with a next-attempt time RecoveryAge ahead). The
//     recovery sweep takes them over once they are older than Options.RecoveryAge, which
//     recovers rows left by a process that died after commit.
//   - a time: the row is due at that time. Rows from app-managed transactions, and rows handed
//     off by the engine's publish buffer when the backend refused a flush or a closing node ran
//     out of time (Store.Handoff), are due at once, for the relay and the very next sweep;
//     a failed publish schedules the row again with exponential backoff (Options.BackoffBase
//     doubling to Options.BackoffMax). The relay (on NOTIFY) and the sweep publish due rows.
//
// The relay and the sweep claim rows with SELECT ... FOR UPDATE SKIP LOCKED, publish them
// inside the transaction that holds the locks, and delete the published rows in one statement
// before committing. The after-commit publishers instead lease their rows (an UPDATE ... SKIP
// LOCKED of the rows still without a next-attempt time, to RecoveryAge ahead, publishing
// within min(PublishTimeout, RecoveryAge/2)),
// publish them without holding a connection, and delete them (synchronous_commit off: a lost
// delete publishes again). Either way two of them never publish the same row. A publish
// error wrapping core.ErrBackendUnavailable stops the run at once without counting an attempt;
// any other error counts an attempt, records the error, schedules the row later and goes on.
// Rows are never dropped, but poison leaves the outbox: a row the backend refuses permanently
// (an error wrapping core.ErrRejected: too large, invalid) moves to the dead-letter table at once
// (reason rejected), and a row that failed Options.MaxAttempts times (default 20) moves there
// too (reason publish_exhausted), in the transaction of the page that tried it, logged and
// reported to Hooks.DeadLettered; the rows behind it go on. Replay them once fixed. Delivery
// stays at-least-once: a crash between the backend's publish and the delete publishes the row
// again later.
//
// # Dead letters
//
// Store implements core.DeadLetterSink. A dead letter stays in txmq_dead_letters until purged;
// Store.Replay republishes it with its attempt count reset to 0 and marks it replayed
// (replay_count, replayed_at). A batch dead-lettered again while its row is dead keeps the
// first reason, error and attempts, and DeadLetter answers core.ErrAlreadyDeadLettered (the
// engine then skips OnError); once replayed, failing again updates the row (last_failed_at, reason,
// error) and it counts as dead again. A dead letter of a replay generation below the row's
// replay count is a stale copy coming back, not a failure of the replay (see
// core.DeadLetter.Replays); a new row's replay count starts at its batch's generation, so
// that this holds after a purge too.
//
// # Ordered queues
//
// Rows of an ordered queue carry their batch's ordering key and are published in id order per
// key (see the comment in order.go). A replayed dead letter of an ordered queue is published
// with its key, so it goes to the back of its key: after every batch of the key the backend
// holds when it is replayed, before the ones published later (the parity property
// ordering/dead_letter_replay_back_of_key). Store also implements core.KeyHolder (HoldsKey,
// one index probe): a node that handed a batch of a key to the outbox asks it before writing
// the key's next batch, and hands that one off too while rows of the key remain, so the key's
// order holds across an outage (ordering/order_through_handoff_outage).
package outbox
