package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
)

func init() {
	register(&command{name: "migrate", summary: "create or upgrade txmq's tables in the app database", run: runMigrate})
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", "migrate [--database-url URL] [--schema NAME]", stderr)
	f := addDBFlags(fs, false)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *f.url == "" {
		return &usageError{msg: "no app database: set --database-url or TXMQ_DATABASE_URL"}
	}
	if err := f.resolveSchema(nil); err != nil { // TXMQ_BACKEND's txmq_schema counts too
		return err
	}
	pool, err := connect(ctx, *f.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, m := range migrators {
		if err := m.migrate(cctx, pool, *f.schema); err != nil {
			return fmt.Errorf("migrating %s: %w", m.name, err)
		}
		fmt.Fprintf(stdout, "%s: schema %q is up to date\n", m.name, *f.schema)
	}
	return nil
}

// migrator is one component with tables in the app database.
type migrator struct {
	name    string
	migrate func(ctx context.Context, pool *pgxpool.Pool, schema string) error
}

var migrators = []migrator{
	{name: "outbox", migrate: func(ctx context.Context, pool *pgxpool.Pool, schema string) error {
		return outbox.Migrate(ctx, pool, &outbox.Options{Schema: schema})
	}},
	{name: "ledger", migrate: func(ctx context.Context, pool *pgxpool.Pool, schema string) error {
		return ledger.Migrate(ctx, pool, &ledger.Options{Schema: schema})
	}},
	{name: "sqljobs", migrate: func(ctx context.Context, pool *pgxpool.Pool, schema string) error {
		return sqljobs.Migrate(ctx, pool, &sqljobs.Options{Schema: schema})
	}},
}
