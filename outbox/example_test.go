package outbox_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/outbox"
)

type Order struct {
	ID    int64  `json:"id"`
	Email string `json:"email"`
}

// OrderPlaced is published if and only if the order's transaction commits.
var OrderPlaced = txmq.MustDeclare("order-placed", txmq.QueueConfig[Order]{Transactional: txmq.Require})

// Publishing in a transaction: the message becomes an outbox row of the same transaction, is
// published right after the commit, and is never published if the transaction rolls back.
func ExampleStore_RunInTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("TXMQ_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	backend := memory.New(nil) // or core.OpenBackend(ctx, os.Getenv("TXMQ_BACKEND")), its adapter imported
	if err := outbox.Migrate(ctx, pool, nil); err != nil {
		log.Fatal(err)
	}
	store, err := outbox.New(pool, &outbox.Options{Backend: backend})
	if err != nil {
		log.Fatal(err)
	}
	_ = store.Start(ctx) // the relay and the recovery sweep
	defer store.Close(ctx)
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Handoff: store, DeadLetters: store})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)

	err = store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO orders (email) VALUES ($1) RETURNING id`, "ada@example.com").Scan(&id); err != nil {
			return err
		}
		// Same ctx: the message joins the transaction.
		return OrderPlaced.Publish(ctx, node, Order{ID: id, Email: "ada@example.com"})
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Publishing into a transaction the app manages itself: the row is written in tx, and the relay
// publishes it within milliseconds of the commit (LISTEN/NOTIFY).
func ExampleStore_WithTx() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("TXMQ_DATABASE_URL"))
	defer pool.Close()
	backend := memory.New(nil)
	store, _ := outbox.New(pool, &outbox.Options{Backend: backend})
	_ = store.Start(ctx)
	defer store.Close(ctx)
	node, _ := txmq.NewNode(backend, &txmq.NodeOptions{Handoff: store, DeadLetters: store})
	defer node.Close(ctx)

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := OrderPlaced.Publish(store.WithTx(ctx, tx), node, Order{ID: 7, Email: "bob@example.com"}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
