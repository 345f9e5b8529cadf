package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq/core"
)

// appTx is a transaction the app manages, seen as a core.Tx: each publish writes its rows at
// once, inside that transaction.
type appTx struct {
	s    *Store
	exec func(ctx context.Context, sql string, args ...any) error
	err  error // set: every Stage fails with it (a pgx tx given to a store of another database)
}

// WithTx returns ctx carrying tx, a pgx transaction the app begins and commits itself.
// Publishes on Require and Try queues made with the returned context write their outbox rows
// into tx at once (an error fails the publish call; the app decides whether to roll back), and
// send a NOTIFY: after COMMIT, the relay of any started Store on this schema publishes them
// within milliseconds, and the sweep does within Options.SweepInterval if no relay listens.
// Rolling back tx discards them, and so does rolling back any savepoint of tx they were
// written in, however it was made (tx.Begin, pgx.BeginFunc, a SAVEPOINT statement): they are
// ordinary rows of the transaction. Publish with a context from WithTx while the savepoint is
// open; tx itself, not the savepoint's pgx.Tx, is enough, since both run on one connection.
// Never queues are refused inside tx: it cannot report its commit. On a store of another
// database (NewWithDialect) every publish made with the returned context fails with an error
// wrapping ErrNeedsPostgres: use WithSQLTx.
func (s *Store) WithTx(ctx context.Context, tx pgx.Tx) context.Context {
	if s == nil {
		return ctx // no outbox: publishes on Require queues fail with core.ErrNoTransaction
	}
	return core.ContextWithTx(ctx, &appTx{s: s, err: s.needsPG("WithTx", "use WithSQLTx with the app's *sql.Tx"), exec: func(ctx context.Context, sql string, args ...any) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	}})
}

// WithSQLTx is WithTx for a database/sql transaction: on PostgreSQL (for example through
// github.com/jackc/pgx/v5/stdlib), rows are written with tx.ExecContext and $n placeholders;
// on a store of another dialect (NewWithDialect) with that database's statement, and without
// NOTIFY: the relays of started stores find them within Options.PollInterval of the commit.
// database/sql has no nested transactions; savepoints are SQL statements run on tx
// (tx.ExecContext(ctx, "SAVEPOINT a"), then "ROLLBACK TO SAVEPOINT a" or "RELEASE SAVEPOINT
// a"). Because each publish writes its rows into tx at once, rolling back to a savepoint
// discards the rows published after it, and releasing it keeps them, as for any row; nothing
// is staged in memory that a savepoint could miss. Never queues are refused, as with WithTx.
func (s *Store) WithSQLTx(ctx context.Context, tx *sql.Tx) context.Context {
	if s == nil {
		return ctx // no outbox: publishes on Require queues fail with core.ErrNoTransaction
	}
	s.withSQLTxUsed.Store(true)
	return core.ContextWithTx(ctx, &appTx{s: s, exec: func(ctx context.Context, sql string, args ...any) error {
		_, err := tx.ExecContext(ctx, sql, args...)
		return err
	}})
}

// Stage writes p's batches as due rows in the app's transaction and notifies the relay. It
// implements core.Tx.
func (a *appTx) Stage(ctx context.Context, p *core.Pending) error {
	if a.err != nil {
		return fmt.Errorf("txmq outbox: queue %q: %w", p.Queue, a.err)
	}
	batches, err := core.Batches([]*core.Pending{p}, time.Now())
	if err != nil {
		return fmt.Errorf("txmq outbox: queue %q: preparing batches: %w", p.Queue, err)
	}
	queued, err := a.s.writeHandedInto(ctx, a.write, nil, nil)
	if err != nil {
		return fmt.Errorf("txmq outbox: queue %q: %w", p.Queue, err)
	}
	if queued > 0 {
		a.s.log.Warn("txmq outbox: batches handed off while a WithSQLTx transaction holds the database's only writer are written into that transaction; they are lost if it rolls back (use RunInSQLTx, which writes them again)",
			"queue", p.Queue, "batches", queued)
	}
	return a.stageRows(ctx, p.Queue, batches)
}

// stageRows writes a publish's batches as due rows in the app's transaction.
func (a *appTx) stageRows(ctx context.Context, queue string, batches []core.OutgoingBatch) error {
	if err := a.write(ctx, batches); err != nil {
		return fmt.Errorf("txmq outbox: queue %q: %w", queue, err)
	}
	return nil
}

// write writes batches as due rows in the app's transaction.
func (a *appTx) write(ctx context.Context, batches []core.OutgoingBatch) error {
	for len(batches) > 0 {
		chunk := batches[:min(len(batches), insertChunk)]
		batches = batches[len(chunk):]
		q, args := a.s.db.StageSQL(chunk)
		if err := a.exec(ctx, q, args...); err != nil {
			return fmt.Errorf("writing %d outbox row(s) into the app's transaction (table %s): %w; the transaction is probably aborted now: roll it back, and check that outbox.Migrate ran",
				len(chunk), a.s.outbox, err)
		}
	}
	return nil
}

// AfterCommit reports false: an app-managed transaction cannot tell when it commits. It
// implements core.Tx.
func (a *appTx) AfterCommit(func()) bool { return false }
