package appdb_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/mysql/appdb" // mysql:// as TXMQ_DATABASE_URL
)

type order struct {
	ID int `json:"id"`
}

// An app on MySQL/MariaDB publishes inside its own database/sql transactions: the message is
// published if and only if the order row commits.
func Example() {
	ctx := context.Background()
	orders, err := txmq.Declare("orders_placed", txmq.QueueConfig[order]{Transactional: txmq.Require})
	if err != nil {
		log.Fatal(err)
	}
	app, err := txmq.Open(ctx, &txmq.Config{
		Backend:     "memory://",
		DatabaseURL: "mysql://root@127.0.0.1:3306/app", // the outbox lives in database "txmq" beside it
	})
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close(ctx)
	err = app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", 42); err != nil {
			return err
		}
		return orders.Publish(ctx, app.Node, order{ID: 42})
	})
	if err != nil {
		log.Fatal(err)
	}
}

type report struct {
	Day string `json:"day"`
}

// Schedules, pauses and rate limits on a MySQL/MariaDB app database hold across the nodes of
// the app: each node opened this way publishes each tick of "nightly" with the others once
// between them, a pause reaches all of them, and the rate limit is shared.
func Example_controlTables() {
	ctx := context.Background()
	reports, err := txmq.Declare("reports", txmq.QueueConfig[report]{
		RateLimit: txmq.RateLimit{Batches: 10, Per: time.Second}, // 10 a second across every node
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := reports.Schedule("nightly", txmq.ScheduleConfig[report]{Cron: "0 2 * * *", Messages: func(tick time.Time) []report {
		return []report{{Day: tick.Format(time.DateOnly)}}
	}}); err != nil {
		log.Fatal(err)
	}
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", DatabaseURL: "mysql://root@127.0.0.1:3306/app"})
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close(ctx)
	// Every node of the app stops starting reports within its PauseCheck.
	if err := app.Pause(ctx, "reports", "ops"); err != nil {
		log.Fatal(err)
	}
}
