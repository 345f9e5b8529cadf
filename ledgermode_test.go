package txmq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/testenv"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest"
)

// TestAppLedgerMode: Open with ledger mode keeps what the node publishes and what the outbox
// relays (two kept batches), settles both once they complete, and derives the horizon from
// the node's lease.
func TestAppLedgerMode(t *testing.T) {
	t.Parallel()
	pool := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, pool)
	reg := txmq.NewRegistry()
	qtx := txmq.MustDeclareIn(reg, "modetx", txmq.QueueConfig[string]{Transactional: txmq.Require})
	qd := txmq.MustDeclareIn(reg, "modedirect", txmq.QueueConfig[string]{Transactional: txmq.Try})
	lease := 3 * time.Second
	app, err := txmq.Open(context.Background(), &txmq.Config{Backend: "memory://", DatabaseURL: testenv.PostgresURL(t), Schema: schema,
		Logger: txmqtest.DiscardLogger(), Node: txmq.NodeOptions{Registry: reg, Lease: lease},
		Ledger: &ledger.Options{Mode: true, FlushInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	if got, want := app.Ledger.Horizon(), ledger.HorizonFor(lease); got != want {
		t.Fatalf("horizon %v; want HorizonFor(the node's lease) = %v", got, want)
	}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	listener := func(_ context.Context, msgs []string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen[m] = true
		}
		return nil
	}
	for _, q := range []*txmq.Queue[string]{qtx, qd} {
		if err := q.Listen(app.Node, listener); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := app.Node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := app.Store.RunInTx(ctx, func(ctx context.Context, _ pgx.Tx) error { return qtx.Publish(ctx, app.Node, "tx") }); err != nil {
		t.Fatal(err)
	}
	if err := qd.Publish(ctx, app.Node, "direct"); err != nil {
		t.Fatal(err)
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["tx"] && seen["direct"]
	}, "both messages delivered")
	if s := app.Ledger.Stats(); s.Kept < 2 {
		t.Fatalf("ledger stats %+v; want the node's batch and the outbox's kept", s)
	}
	txmqtest.Eventually(t, 20*time.Second, func() bool {
		n, err := app.Ledger.KeptBatches(ctx)
		return err == nil && n == 0
	}, "both kept batches settled after their completion")
}
