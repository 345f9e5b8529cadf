package sqljobs_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqljobs"
)

// New keeps batches in the jobs tables of the app's own database; Migrate creates them. Every
// node opens a Backend on the same database and schema. It needs PostgreSQL, so this example
// has no output line: go test compiles it but does not run it. (By setting instead:
// TXMQ_BACKEND=postgres://user@host/db?txmq_schema=txmq, which migrates too.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("TXMQ_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	opts := &sqljobs.Options{Schema: "txmq"} // the outbox's schema, the default
	if err := sqljobs.Migrate(ctx, pool, opts); err != nil {
		log.Fatal(err)
	}
	be, err := sqljobs.New(ctx, pool, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer be.Close() // the pool stays the app's

	node, err := txmq.NewNode(be, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	// Listen, then node.Start(ctx), as on any backend.
}
