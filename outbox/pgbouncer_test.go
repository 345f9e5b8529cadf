package outbox_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/internal/pgpooler"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// pgbouncerPool returns a pool on TXMQ_PGBOUNCER_URL (PgBouncer in transaction pooling mode)
// configured as txmq.Open configures one for a TXMQ_DATABASE_URL with txmq_pgbouncer=true.
func pgbouncerPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	u, err := url.Parse(testenv.PgBouncerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(pgpooler.ParamPgBouncer, "true")
	if _, err := pgpooler.Take("TXMQ_PGBOUNCER_URL", q); err != nil {
		t.Fatal(err)
	}
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestPgBouncer: behind PgBouncer in transaction pooling mode the store migrates, RunInTx
// publishes after commit, and the relay publishes the rows of app-managed transactions (WithTx)
// (and, when polling, handed-off batches), either LISTENing on Options.ListenURL (the server
// itself) or polling every PollInterval; the sweep, whose period is an hour here, does not do
// it for them.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		listen bool
	}{
		{name: "polling"},
		{name: "listen url", listen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			direct := testenv.PostgresURL(t)
			e := setupOn(t, pgbouncerPool(t), func(o *outbox.Options) {
				o.PgBouncer = true
				o.SweepInterval = time.Hour
				if tc.listen {
					o.ListenURL = direct
				}
			})
			if err := e.store.Start(ctx); err != nil {
				t.Fatalf("Start: %v", err)
			}
			t.Cleanup(func() { _ = e.store.Close(context.Background()) })
			has := func(ns ...int) func() bool {
				return func() bool {
					got := e.be.messages(t, "orders")
					for _, n := range ns {
						if !slices.Contains(got, n) {
							return false
						}
					}
					return true
				}
			}

			// RunInTx: the business row and the outbox row commit together, published after.
			err := e.store.RunInTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
				for i := 1; i <= 3; i++ {
					if _, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES ($1)", i); err != nil {
						return err
					}
					if err := e.orders.Publish(ctx, e.node, msg{i}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("RunInTx: %v", err)
			}
			waitFor(t, 20*time.Second, "RunInTx's messages 1-3", has(1, 2, 3))

			// WithTx: an app-managed transaction; the relay publishes after its commit.
			tx, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+e.biz+" VALUES (4)"); err != nil {
				t.Fatal(err)
			}
			if err := e.orders.Publish(e.store.WithTx(ctx, tx), e.node, msg{4}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "the relay publishing the WithTx message 4", has(4))

			if !tc.listen {
				// Handoff: rows due now, sent no NOTIFY; the polling relay's next pass
				// publishes them (with LISTEN they wait for the sweep, as without PgBouncer).
				before := len(e.be.published())
				e.handoff(t, 2)
				waitFor(t, 20*time.Second, "the polling relay publishing 2 handed-off batches", func() bool { return len(e.be.published()) >= before+2 })
			}
			waitFor(t, 20*time.Second, "an empty outbox", func() bool { return e.outboxRows(t) == 0 })
			if n := e.bizRows(t); n != 4 {
				t.Fatalf("business rows = %d; want 4", n)
			}
		})
	}
}
