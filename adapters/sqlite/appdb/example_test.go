package appdb_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/sqlite"       // sqlite:// as TXMQ_BACKEND: the jobs in the same file
	_ "github.com/txmq/txmq/adapters/sqlite/appdb" // sqlite:// as TXMQ_DATABASE_URL: the outbox and dead letters
)

type order struct {
	ID int `json:"id"`
}

// An app keeps everything in one SQLite file: its own tables, the outbox and the jobs. It
// publishes inside its database/sql transactions: the message is published if and only if
// the order row commits.
func Example() {
	dir, err := os.MkdirTemp("", "txmq-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file := "sqlite://" + filepath.Join(dir, "app.db")

	ctx := context.Background()
	reg := txmq.NewRegistry()
	orders, err := txmq.DeclareIn(reg, "orders_placed", txmq.QueueConfig[order]{Transactional: txmq.Require})
	if err != nil {
		log.Fatal(err)
	}
	app, err := txmq.Open(ctx, &txmq.Config{Backend: file, DatabaseURL: file, Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close(ctx)
	placed := make(chan int, 10)
	if err := orders.Listen(app.Node, func(_ context.Context, msgs []order) error {
		for _, o := range msgs {
			placed <- o.ID
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := app.Node.Start(ctx); err != nil {
		log.Fatal(err)
	}

	err = app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY)"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", 42); err != nil {
			return err
		}
		return orders.Publish(ctx, app.Node, order{ID: 42})
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order placed:", <-placed)
	// Output: order placed: 42
}
