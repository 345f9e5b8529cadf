package appdb_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/outbox/outboxtest"
)

// TestOpen: TXMQ_DATABASE_URL=mysql://... works through txmq.Open once this package is
// linked: the tables are migrated into the schema's database, RunInSQLTx publishes after
// commit, the listener gets the message; App.Pause and Resume write the database's pause
// marks; the ledger is refused.
func TestOpen(t *testing.T) {
	t.Parallel()
	u := mysqlURL(t)
	schema := privateSchema(t, openDB(t, u))
	ctx := context.Background()
	reg := txmq.NewRegistry()
	q := outboxtest.Must(txmq.DeclareIn(reg, "orders", txmq.QueueConfig[msg]{Transactional: txmq.Require}))
	cfg := &txmq.Config{Backend: "memory://", DatabaseURL: u.String(), Schema: schema, Logger: quiet,
		Node: txmq.NodeOptions{Registry: reg}}
	app, err := txmq.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	if app.Pool != nil || app.Store.Dialect() != "mysql" {
		t.Fatalf("Pool = %v, Dialect = %q", app.Pool, app.Store.Dialect())
	}
	got := make(chan int, 10)
	if err := q.Listen(app.Node, func(_ context.Context, msgs []msg) error {
		for _, m := range msgs {
			got <- m.N
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, app.Node, msg{N: 1}); err == nil {
		t.Fatal("a Require publish outside a transaction succeeded")
	}
	if err := app.Store.RunInSQLTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return q.Publish(ctx, app.Node, msg{N: 7})
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != 7 {
			t.Fatalf("got %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message never arrived")
	}

	// The pause marks are the database's: App.Pause writes one every node reads.
	if err := app.Pause(ctx, "orders", "test"); err != nil {
		t.Fatal(err)
	}
	if ps, err := app.Store.Pauses().PausedQueues(ctx); err != nil || ps["orders"].PausedBy != "test" {
		t.Fatalf("PausedQueues after App.Pause = %v, %v", ps, err)
	}
	if err := app.Resume(ctx, "orders"); err != nil {
		t.Fatal(err)
	}

	cfg2 := *cfg
	cfg2.Ledger = &ledger.Options{}
	if app2, err := txmq.Open(ctx, &cfg2); err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		if app2 != nil {
			_ = app2.Close(ctx)
		}
		t.Fatalf("Open with a ledger on mysql = %v, want an error naming PostgreSQL", err)
	}
	if err := app.Store.Savepoint(ctx, nil); !errors.Is(err, outbox.ErrNeedsPostgres) {
		t.Fatalf("Savepoint = %v", err)
	}
}
