package txmq

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// RunInTx runs fn in a new transaction of the app database and commits it when fn returns nil.
// Publishes made with the ctx fn receives join the transaction by their queue's Transactional
// setting: Require and Try queues write outbox rows in it, Never queues wait for the commit.
// Nothing is published if it rolls back. It is App.Store.RunInTx; without a database it
// returns an error wrapping outbox.ErrNoDatabase that names TXMQ_DATABASE_URL.
func (a *App) RunInTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return a.Store.RunInTx(ctx, fn)
}

// WithTx returns ctx carrying tx, a pgx transaction the app begins and commits itself, so that
// publishes made with the returned ctx write outbox rows in it (Require and Try queues; a
// Never queue cannot be published inside it, because the app's commit cannot be observed). It
// is App.Store.WithTx.
func (a *App) WithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return a.Store.WithTx(ctx, tx)
}

// WithSQLTx is WithTx for a database/sql transaction (pgx's stdlib driver or lib/pq). It is
// App.Store.WithSQLTx.
func (a *App) WithSQLTx(ctx context.Context, tx *sql.Tx) context.Context {
	return a.Store.WithSQLTx(ctx, tx)
}
