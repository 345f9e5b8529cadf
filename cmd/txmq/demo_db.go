package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// demoDB is the demo's app database: the outbox and dead-letter store, in its own schema on
// PostgreSQL, or on another database a module registered (MySQL, a SQLite file).
type demoDB struct {
	pool    *pgxpool.Pool // nil on another database
	closeDB func() error  // another database's handle
	store   *outbox.Store
	where   string // where the demo's tables stay, for the closing line
}

// openDemoDB connects, migrates the outbox tables in schema and starts the store's relay,
// publishing to backend.
func openDemoDB(ctx context.Context, rawURL, schema string, backend core.Backend, logger *slog.Logger) (*demoDB, error) {
	if db, u, ok := otherDatabase(rawURL); ok {
		return openOtherDemoDB(ctx, db, u, rawURL, schema, backend, logger)
	}
	o := &outbox.Options{Schema: schema, Backend: backend, Logger: logger}
	rest, err := databaseURL(rawURL, o)
	if err != nil {
		return nil, core.RedactError(fmt.Errorf("app database %s: %w", core.Redact(rawURL), err), rawURL)
	}
	pool, err := pgxpool.New(ctx, rest)
	if err != nil {
		return nil, core.RedactError(fmt.Errorf("app database %s: %w", core.Redact(rawURL), err), rawURL)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(cctx); err != nil {
		pool.Close()
		return nil, core.RedactError(fmt.Errorf("app database %s: cannot connect (unset TXMQ_DATABASE_URL to run the demo without it): %w", core.Redact(rawURL), err), rawURL)
	}
	if err := outbox.Migrate(cctx, pool, o); err != nil {
		pool.Close()
		return nil, err
	}
	store, err := outbox.New(pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := store.Start(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	where := fmt.Sprintf("schema %s (see them with: txmq dlq ls --schema %s); remove them with: DROP SCHEMA %s CASCADE",
		schema, schema, pgx.Identifier{schema}.Sanitize())
	return &demoDB{pool: pool, store: store, where: where}, nil
}

// openOtherDemoDB is openDemoDB on an app database another module registered (MySQL, SQLite):
// its tables migrated and its store opened by the module.
func openOtherDemoDB(ctx context.Context, db outbox.Database, u *url.URL, rawURL, schema string, backend core.Backend, logger *slog.Logger) (*demoDB, error) {
	where := fmt.Sprintf("database %s (%s; see them with: txmq dlq ls --database-url %s --schema %s)", schema, u.Scheme, core.Redact(rawURL), schema)
	if s := strings.ToLower(u.Scheme); s == "sqlite" || s == "sqlite3" {
		schema = "" // SQLite has no schemas: the tables go into the file
		where = fmt.Sprintf("file %s (see them with: txmq dlq ls --database-url %s)", u.Opaque+u.Host+u.Path, rawURL)
	}
	wrap := func(err error) error {
		return core.RedactError(fmt.Errorf("app database %s: %w", core.Redact(rawURL), err), rawURL)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.Migrate(cctx, u, schema); err != nil {
		return nil, wrap(err)
	}
	store, closeDB, err := db.Open(cctx, u, &outbox.Options{Schema: schema, Backend: backend, Logger: logger}, false)
	if err != nil {
		return nil, wrap(err)
	}
	if err := store.Start(ctx); err != nil {
		_ = closeDB()
		return nil, wrap(err)
	}
	return &demoDB{closeDB: closeDB, store: store, where: where}, nil
}

// runInTx runs fn in a transaction of the app database (RunInTx on PostgreSQL, RunInSQLTx on
// another), fn's context carrying it.
func (db *demoDB) runInTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if db.pool != nil {
		return db.store.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
	}
	return db.store.RunInSQLTx(ctx, func(ctx context.Context, _ *sql.Tx) error { return fn(ctx) })
}

// replay finds the stored row of dl and replays it, as txmq dlq replay does.
func (db *demoDB) replay(ctx context.Context, dl *core.DeadLetter) error {
	var after int64
	for {
		rows, err := db.store.ListDeadLetters(ctx, outbox.DLQFilter{Queue: dl.Queue, State: outbox.DLQDead, AfterID: after})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.BatchID == dl.BatchID {
				return db.store.Replay(ctx, r.ID)
			}
		}
		if len(rows) == 0 {
			return fmt.Errorf("dead letter of batch %s (queue %s) not found in the dead-letter table", dl.BatchID, dl.Queue)
		}
		after = rows[len(rows)-1].ID
	}
}

func (db *demoDB) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = db.store.Close(ctx)
	if db.pool != nil {
		db.pool.Close()
	}
	if db.closeDB != nil {
		_ = db.closeDB()
	}
}
