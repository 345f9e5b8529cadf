// Command bench compares txmq's sqljobs backend with River (github.com/riverqueue/river) doing
// no-op work on the same Postgres at the same concurrency, side by side in one run:
//
//	go run . -url postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// Scenarios: burning down a backlog (txmq with its default 100-message batches, txmq with
// one message per batch, River with one job per message) and pickup latency of single
// messages published to idle consumers (p50/p99). It is a module of its own so that River
// never becomes a dependency of the library.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/core"
)

var (
	dbURL   = flag.String("url", envOr("TXMQ_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "Postgres URL")
	msgs    = flag.Int("n", 50000, "messages in the backlog scenarios")
	workers = flag.Int("workers", 50, "concurrency: River MaxWorkers and txmq MaxConcurrentBatches")
	samples = flag.Int("samples", 200, "pickup latency samples")
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func main() {
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	fmt.Printf("backlog burn-down: %d messages, concurrency %d\n", *msgs, *workers)
	tx100 := txmqBacklog(ctx, pool, *msgs, 100)
	fmt.Printf("  txmq sqljobs (100 msgs/batch): %9.0f msgs/s  (%7.0f batches/s)\n", tx100, tx100/100)
	tx1 := txmqBacklog(ctx, pool, *msgs/5, 1)
	fmt.Printf("  txmq sqljobs (1 msg/batch):    %9.0f msgs/s\n", tx1)
	rvDefault := riverBacklog(ctx, pool, *msgs/5, false)
	fmt.Printf("  river default config:          %9.0f jobs/s\n", rvDefault)
	rv := riverBacklog(ctx, pool, *msgs/5, true)
	fmt.Printf("  river FetchCooldown 1ms:       %9.0f jobs/s\n", rv)
	fmt.Printf("  ratio vs tuned river: txmq(100 msgs/batch) %.1fx, txmq(1 msg/batch) %.2fx\n", tx100/rv, tx1/rv)

	fmt.Printf("pickup latency: %d single messages to an idle consumer\n", *samples)
	p50, p99 := txmqLatency(ctx, pool, *samples)
	fmt.Printf("  txmq sqljobs: p50 %v  p99 %v  (publish buffer window 1 ms)\n", p50, p99)
	p50, p99 = riverLatency(ctx, pool, *samples, false)
	fmt.Printf("  river default: p50 %v  p99 %v\n", p50, p99)
	p50, p99 = riverLatency(ctx, pool, *samples, true)
	fmt.Printf("  river tuned:   p50 %v  p99 %v\n", p50, p99)
}

type benchMsg struct {
	ID int `json:"id"`
}

func freshSchema(ctx context.Context, pool *pgxpool.Pool, prefix string) (string, func()) {
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	return name, func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	}
}

func txmqBackend(ctx context.Context, pool *pgxpool.Pool, schema string) *sqljobs.Backend {
	opts := &sqljobs.Options{Schema: schema, ReapInterval: -1, Logger: quiet}
	if err := sqljobs.Migrate(ctx, pool, opts); err != nil {
		log.Fatal(err)
	}
	be, err := sqljobs.New(ctx, pool, opts)
	if err != nil {
		log.Fatal(err)
	}
	return be
}

// txmqBacklog stores n messages (perBatch per batch) before any consumer runs, then times one
// node with MaxConcurrentBatches=workers draining them; it returns messages/s.
func txmqBacklog(ctx context.Context, pool *pgxpool.Pool, n, perBatch int) float64 {
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	reg := core.NewRegistry()
	q := core.MustDeclare(reg, "bench", core.QueueConfig[benchMsg]{Transactional: core.Try, MaxBatchMessages: perBatch, MaxConcurrentBatches: core.Cap(*workers)})

	pub, err := core.NewNode(&core.NodeOptions{Backend: be, Registry: reg, Logger: quiet, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := pub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	chunk := make([]benchMsg, 0, 1000)
	for i := range n {
		chunk = append(chunk, benchMsg{ID: i})
		if len(chunk) == cap(chunk) || i == n-1 {
			if err := q.PublishMany(ctx, pub, chunk); err != nil {
				log.Fatal(err)
			}
			chunk = chunk[:0]
		}
	}
	if err := pub.Close(ctx); err != nil {
		log.Fatal(err)
	}
	want := int64((n + perBatch - 1) / perBatch)
	for {
		d, err := be.Depths(ctx, []string{"bench"})
		if err != nil {
			log.Fatal(err)
		}
		if d["bench"].Ready >= want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	var got atomic.Int64
	done := make(chan struct{})
	node, err := core.NewNode(&core.NodeOptions{Backend: be, Registry: reg, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Listen(node, func(_ context.Context, ms []benchMsg) error {
		if got.Add(int64(len(ms))) == int64(n) {
			close(done)
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		log.Fatalf("txmq: delivered %d of %d", got.Load(), n)
	}
	elapsed := time.Since(start)
	_ = node.Close(ctx)
	return float64(n) / elapsed.Seconds()
}

// txmqLatency publishes single messages to an idle listening node and returns p50/p99 of the
// time from Publish to the listener.
func txmqLatency(ctx context.Context, pool *pgxpool.Pool, n int) (time.Duration, time.Duration) {
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	reg := core.NewRegistry()
	q := core.MustDeclare(reg, "lat", core.QueueConfig[int64]{Transactional: core.Try})
	node, err := core.NewNode(&core.NodeOptions{Backend: be, Registry: reg, Logger: quiet, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	lat := make(chan time.Duration, n)
	if err := q.Listen(node, func(_ context.Context, ms []int64) error {
		for _, sent := range ms {
			lat <- time.Since(time.Unix(0, sent))
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	time.Sleep(300 * time.Millisecond)
	var out []time.Duration
	for range n {
		if err := q.Publish(ctx, node, time.Now().UnixNano()); err != nil {
			log.Fatal(err)
		}
		out = append(out, <-lat)
		time.Sleep(10 * time.Millisecond)
	}
	return pct(out)
}

type noopArgs struct {
	ID   int   `json:"id"`
	Sent int64 `json:"sent"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	fn func(*river.Job[noopArgs])
}

func (w *noopWorker) Work(_ context.Context, j *river.Job[noopArgs]) error {
	w.fn(j)
	return nil
}

func riverClient(ctx context.Context, pool *pgxpool.Pool, schema string, tuned bool, fn func(*river.Job[noopArgs])) *river.Client[pgx.Tx] {
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		log.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		log.Fatal(err)
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{fn: fn})
	cfg := &river.Config{
		Schema:  schema,
		Logger:  quiet,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		Workers: ws,
	}
	if tuned {
		// River's throughput is bounded by FetchCooldown x MaxWorkers; take the bound away.
		cfg.FetchCooldown = time.Millisecond
		cfg.FetchPollInterval = 100 * time.Millisecond
	}
	c, err := river.NewClient(driver, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// riverBacklog inserts n jobs before the client starts, then times it draining them.
func riverBacklog(ctx context.Context, pool *pgxpool.Pool, n int, tuned bool) float64 {
	schema, drop := freshSchema(ctx, pool, "bench_river")
	defer drop()
	var got atomic.Int64
	done := make(chan struct{})
	c := riverClient(ctx, pool, schema, tuned, func(*river.Job[noopArgs]) {
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	params := make([]river.InsertManyParams, 0, 1000)
	for i := range n {
		params = append(params, river.InsertManyParams{Args: noopArgs{ID: i}})
		if len(params) == cap(params) || i == n-1 {
			if _, err := c.InsertMany(ctx, params); err != nil {
				log.Fatal(err)
			}
			params = params[:0]
		}
	}
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		log.Fatalf("river: worked %d of %d", got.Load(), n)
	}
	elapsed := time.Since(start)
	_ = c.Stop(ctx)
	return float64(n) / elapsed.Seconds()
}

func riverLatency(ctx context.Context, pool *pgxpool.Pool, n int, tuned bool) (time.Duration, time.Duration) {
	schema, drop := freshSchema(ctx, pool, "bench_river")
	defer drop()
	lat := make(chan time.Duration, n)
	c := riverClient(ctx, pool, schema, tuned, func(j *river.Job[noopArgs]) {
		lat <- time.Since(time.Unix(0, j.Args.Sent))
	})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)
	time.Sleep(300 * time.Millisecond)
	var out []time.Duration
	for range n {
		if _, err := c.Insert(ctx, noopArgs{Sent: time.Now().UnixNano()}, nil); err != nil {
			log.Fatal(err)
		}
		out = append(out, <-lat)
		time.Sleep(10 * time.Millisecond)
	}
	return pct(out)
}

func pct(d []time.Duration) (time.Duration, time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	r := func(p float64) time.Duration {
		return d[min(len(d)-1, int(p*float64(len(d))))].Round(10 * time.Microsecond)
	}
	return r(0.50), r(0.99)
}
