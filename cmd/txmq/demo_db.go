package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// demoDB is the demo's app database: the outbox and dead-letter store in its own schema.
type demoDB struct {
	pool  *pgxpool.Pool
	store *outbox.Store
}

// openDemoDB connects, migrates the outbox tables in schema and starts the store's relay,
// publishing to backend.
func openDemoDB(ctx context.Context, rawURL, schema string, backend core.Backend, logger *slog.Logger) (*demoDB, error) {
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
	return &demoDB{pool: pool, store: store}, nil
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
	db.pool.Close()
}
