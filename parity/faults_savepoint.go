package parity

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register("transactions",
		property{name: "rolled_back_savepoint_publishes_nothing", run: txSavepoints},
	)
}

// txSavepoints: inside RunInTx, messages published inside a savepoint that is rolled back are
// never delivered, however the savepoint was made: pgx's own idiom (tx.Begin on the tx
// RunInTx hands out, then Rollback), pgx.BeginFunc nested several deep, Store.Savepoint and a
// nested RunInTx inside a raw savepoint, a SAVEPOINT statement through tx.Exec; a released
// savepoint keeps its messages, and rolling back an outer savepoint discards the inner ones it
// released. Require, Try and Never queues alike; exactly the kept messages are delivered.
func txSavepoints(x *X) {
	x.needPostgresAppDB("savepoints made through pgx (the app database's own savepoints are checked by its module's tests)")
	qr := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	qt := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try})
	qn := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Never})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{})
	queues := []*txmq.Queue[Msg]{qr, qt, qn}
	for _, q := range queues {
		listen(x, rec, q, n, nil)
	}
	s := x.store(x.rawClient(), outbox.Options{})
	var kept []string
	// publish publishes one message per queue under label with ctx; keep says whether the
	// savepoints it is in end up released (its messages must be delivered).
	publish := func(ctx context.Context, label string, keep bool) {
		for _, q := range queues {
			k := fmt.Sprintf("%s-%s", label, q.Name())
			if err := q.Publish(ctx, n, Msg{K: k}); err != nil {
				x.T.Fatalf("Publish %s: %v", k, err)
			}
			if keep {
				kept = append(kept, k)
			}
		}
	}
	rollback := errors.New("parity: roll back the savepoint")
	err := s.RunInTx(x.ctx(), func(ctx context.Context, tx pgx.Tx) error {
		publish(ctx, "top", true)

		// pgx's savepoint idiom, rolled back.
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		publish(ctx, "raw-rolled-back", false)
		if err := sp.Rollback(ctx); err != nil {
			return err
		}

		// The same, released.
		sp, err = tx.Begin(ctx)
		if err != nil {
			return err
		}
		publish(ctx, "raw-released", true)
		if err := sp.Commit(ctx); err != nil {
			return err
		}

		// pgx.BeginFunc three deep: the middle level is rolled back after its inner one was
		// released; the outer level is released.
		if err := pgx.BeginFunc(ctx, tx, func(l1 pgx.Tx) error {
			publish(ctx, "l1", true)
			err := pgx.BeginFunc(ctx, l1, func(l2 pgx.Tx) error {
				publish(ctx, "l2", false)
				if err := pgx.BeginFunc(ctx, l2, func(pgx.Tx) error {
					publish(ctx, "l3-released-in-rolled-back", false)
					return nil
				}); err != nil {
					return err
				}
				return rollback
			})
			if !errors.Is(err, rollback) {
				return fmt.Errorf("inner BeginFunc: %w", err)
			}
			publish(ctx, "l1-after", true)
			return nil
		}); err != nil {
			return err
		}

		// Store.Savepoint and a nested RunInTx, both released, inside a raw savepoint that is
		// rolled back.
		sp, err = tx.Begin(ctx)
		if err != nil {
			return err
		}
		if err := s.Savepoint(ctx, func(ctx context.Context, _ pgx.Tx) error {
			publish(ctx, "store-savepoint-in-rolled-back", false)
			return nil
		}); err != nil {
			return err
		}
		if err := runInTx(ctx, s, func(ctx context.Context) error {
			publish(ctx, "nested-runintx-in-rolled-back", false)
			return nil
		}); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		// A SAVEPOINT statement run through Exec, rolled back.
		if _, err := tx.Exec(ctx, "SAVEPOINT parity_sp"); err != nil {
			return err
		}
		publish(ctx, "sql-rolled-back", false)
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT parity_sp"); err != nil {
			return err
		}
		publish(ctx, "end", true)
		return nil
	})
	if err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitDelivered(x, rec, kept)
	x.idle(n)
	assertSame(x, rec, kept)
	x.eventually(func() bool { return outboxRows(x, s) == 0 }, "outbox rows deleted after publish")
}
