package sqljobs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
	"github.com/txmq/txmq/txmqtest/backendtest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// world is one test's database namespace: a schema, migrated, dropped in cleanup.
type world struct {
	t      *testing.T
	url    string // the test server's URL
	admin  *pgxpool.Pool
	schema string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	u := testenv.PostgresURL(t)
	admin := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, admin)
	if err := Migrate(context.Background(), admin, &Options{Schema: schema}); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &world{t: t, url: u, admin: admin, schema: schema}
}

// pool returns a new pool (a separate "node"), closed in cleanup; tracer may be nil.
func (w *world) pool(tracer pgx.QueryTracer) *pgxpool.Pool {
	w.t.Helper()
	return poolFor(w.t, w.url, tracer)
}

func poolFor(t testing.TB, rawURL string, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// backend returns a Backend on a new pool of the world's schema (the reaper off unless opts
// say otherwise), closed in cleanup.
func (w *world) backend(opts *Options) *Backend {
	w.t.Helper()
	return w.backendOn(w.pool(nil), opts)
}

func (w *world) backendOn(pool *pgxpool.Pool, opts *Options) *Backend {
	w.t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Schema = w.schema
	if o.ReapInterval == 0 {
		o.ReapInterval = -1
	}
	if o.Logger == nil {
		o.Logger = txmqtest.DiscardLogger()
	}
	be, err := New(context.Background(), pool, &o)
	if err != nil {
		w.t.Fatalf("New: %v", err)
	}
	w.t.Cleanup(func() { _ = be.Close() })
	return be
}

func publish(t testing.TB, be *Backend, queue, id string, notBefore time.Time) {
	t.Helper()
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte("body-" + id), NotBefore: notBefore, Messages: 1})
	if err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

func excl(queue string) core.QueueSlots {
	return core.QueueSlots{Queue: queue, Free: 1, Exclusive: true}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// countingTracer counts the round trips run on a pool: each plain statement, and each
// pipelined batch once (a guarded statement is one batch: the plan guard and the statement).
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *countingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The helpers the SQL adapters' tests share (txmqtest/backendtest), under this package's
// tests' names.
var (
	publishN = backendtest.PublishN
	fetch    = backendtest.Fetch
	all      = backendtest.All
	depth    = backendtest.Depth
)
