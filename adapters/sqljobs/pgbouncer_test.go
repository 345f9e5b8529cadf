package sqljobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// openPgBouncer opens a Backend from TXMQ_PGBOUNCER_URL with txmq_pgbouncer=true, the world's
// schema and the extra parameters kv; closed in cleanup.
func openPgBouncer(t *testing.T, w *world, kv ...string) *Backend {
	t.Helper()
	raw := testenv.PgBouncerURL(t)
	kv = append([]string{"txmq_pgbouncer", "true", "txmq_schema", w.schema, "txmq_reap_interval", "-1s"}, kv...)
	b, err := core.OpenBackend(ctxT(t), testenv.WithParams(t, raw, kv...))
	if err != nil {
		t.Fatalf("open through PgBouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b.(*Backend)
}

// waitingFetch starts a Fetch that waits up to 30 s for queue and returns its result channel.
func waitingFetch(be *Backend, queue string) <-chan []*core.Claim {
	got := make(chan []*core.Claim, 1)
	go func() {
		cs, _ := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: []core.QueueSlots{all(queue)}, Lease: 10 * time.Second, Wait: 30 * time.Second})
		got <- cs
	}()
	return got
}

// TestPgBouncerWakeups: behind PgBouncer in transaction pooling mode a waiting Fetch is woken
// by a publish either through the LISTEN connection on txmq_listen_url (the direct server) or,
// without one, by polling; without one the Backend never LISTENs through the pooler, where
// LISTEN would succeed and then never deliver a notification.
func TestPgBouncerWakeups(t *testing.T) {
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
			w := newWorld(t)
			var kv []string
			if tc.listen {
				kv = []string{"txmq_listen_url", w.url}
			}
			be := openPgBouncer(t, w, kv...)
			got := waitingFetch(be, "q")
			if tc.listen {
				deadline := time.Now().Add(20 * time.Second)
				for !be.lis.healthy() {
					if time.Now().After(deadline) {
						t.Fatal("the LISTEN connection on txmq_listen_url never came up")
					}
					time.Sleep(10 * time.Millisecond)
				}
			} else {
				time.Sleep(300 * time.Millisecond) // the fetch is waiting
			}
			publish(t, be, "q", "b1", time.Time{})
			select {
			case cs := <-got:
				if len(cs) != 1 || cs[0].ID != "b1" {
					t.Fatalf("fetched %d claims; want b1", len(cs))
				}
			case <-time.After(20 * time.Second): // the fetch waits 30 s: only a wake-up ends it sooner
				t.Fatal("the waiting Fetch was not woken by the publish")
			}
			be.lis.mu.Lock()
			started := be.lis.started
			be.lis.mu.Unlock()
			if started != tc.listen {
				t.Fatalf("listener started = %v; want %v (never LISTEN through the pooler)", started, tc.listen)
			}
		})
	}
}

// TestPgBouncerExecMode: with Options.PgBouncer a pool in describe_exec mode is refused with
// an error naming the fix.
func TestPgBouncerExecMode(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cfg, err := pgxpool.ParseConfig(w.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, err = New(context.Background(), pool, &Options{Schema: w.schema, PgBouncer: true, ReapInterval: -1})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
		t.Fatalf("New = %v; want ErrInvalidConfig naming default_query_exec_mode=exec", err)
	}
	_, err = New(context.Background(), pool, &Options{Schema: w.schema, ListenURL: "postgres://u@h:notaport/db", ReapInterval: -1})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Options.ListenURL") {
		t.Fatalf("New with a bad ListenURL = %v; want ErrInvalidConfig naming Options.ListenURL", err)
	}
}
