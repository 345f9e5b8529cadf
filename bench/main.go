// Command bench compares txmq's sqljobs backend with River (github.com/riverqueue/river) doing
// no-op work on the same Postgres at the same concurrency, side by side in one run:
//
//	go run . -url postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// Scenarios (-only picks some, comma-separated):
//
//   - rounds: the headline comparison: burning down -rounds-n stored one-message batches with
//     txmq (concurrency -txmq-workers, its own pool with the plan guard per session) and River
//     tuned as River's own benchmark runs it (MaxWorkers 2,000, FetchCooldown 2 ms,
//     FetchPollInterval 20 ms; -river-workers, -river-cooldown, -river-poll), in -rounds-count
//     interleaved rounds (River, txmq, River, txmq, ...), each with statements, WAL bytes and
//     the CPU of every Postgres process and of this process per message; min/median/max and
//     the per-round ratios; -sides adds txmq-guarded (a plan guard sent with each statement,
//     as on the app's own pool), txmq-nofairidx (without the fair-key index),
//     txmq-fullprioidx (the priority index over every row, as before migration 0008) and
//     txmq-autoplans (the session guard at plan_cache_mode auto, as before generic plans were
//     forced); txmq sides also print the index entries written per message;
//   - backlog: burning down a backlog (txmq with its default 100-message batches, txmq with
//     one message per batch, River default at -workers and River tuned, one job per message),
//     messages/s, one run each;
//   - latency: pickup latency of single messages published one at a time to idle consumers;
//   - steady: publishing at a fixed rate (-rate msgs/s for -steady) to running consumers:
//     p50/p99 pickup latency and what was delivered;
//   - outbox: what the transactional outbox costs its caller: a business transaction alone,
//     with a raw outbox row (the floor), inside Store.RunInTx and with Store.WithTx, each
//     with one publish, interleaved (-rounds), as ratios to the business transaction; and
//     the transactional pickup latency (RunInTx, publish to listener, p50/p99);
//   - txpickup: the transactional pickup latency at a steady rate: a RunInTx with one
//     publish -txrate times a second (200), -samples x 10 messages; p50/p99/max of the time
//     from the publish to the listener;
//   - controls: what each scheduling control costs on each adapter (-ctl-backends: memory,
//     SQL jobs on -url, Redis, MySQL/MariaDB, SQLite): a plain queue against the same with
//     Prioritized, Fair, ClusterLimit 1000 and Unique (UniqueUntilDone), at -ctl-batches
//     messages per batch, in -ctl-rounds interleaved rounds, as on/off ratios (not in the
//     default -only);
//   - riverprio: River's priorities (1-4) against txmq's (0-9) on SQL jobs, on the same server
//     in -rounds-count interleaved rounds of -rounds-n jobs: River plain, River with
//     priorities, txmq plain, txmq Prioritized, River tuned as in rounds (not in the default
//     -only);
//   - idle: the cost of 1,000 declared queues (-queues) with nothing to do, over -idle:
//     statements sent, Postgres backend CPU of the scenario's connections, and this
//     process's CPU.
//
// It is a module of its own so that River never becomes a dependency of the library.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/bench/internal/txmqbench"
)

var (
	dbURL      = flag.String("url", envOr("TXMQ_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "Postgres URL")
	msgs       = flag.Int("n", 50000, "messages in the 100-msgs/batch backlog; the one-per-batch scenarios use n/5")
	workers    = flag.Int("workers", 50, "concurrency: River MaxWorkers and txmq MaxConcurrentBatches")
	samples    = flag.Int("samples", 200, "pickup latency samples")
	rate       = flag.Int("rate", 200, "steady scenario: messages/s")
	conns      = flag.Int("conns", 20, "pool size (MaxConns) of the pool txmq and River share")
	steadyFor  = flag.Duration("steady", 10*time.Second, "steady scenario: how long to publish")
	queues     = flag.Int("queues", 1000, "idle scenario: declared queues")
	idleFor    = flag.Duration("idle", 30*time.Second, "idle scenario: measuring window")
	only       = flag.String("only", "rounds,backlog,latency,outbox,steady,idle", "scenarios to run, comma-separated")
	rounds     = flag.Int("rounds", 2000, "outbox scenario: interleaved rounds (one call of each kind per round)")
	outboxPace = flag.Duration("pace", 5*time.Millisecond, "outbox scenario: the pause before each call in its paced run (after a back-to-back run)")
	cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the txmq 1 msg/batch backlog here")
	verbose    = flag.Bool("v", false, "log txmq's and River's warnings to stderr")
	analyze    = flag.Bool("analyze", false, "ANALYZE the jobs table (txmq) and river_job (River) once the backlog is stored, before consuming: the statistics autovacuum gathers on its own during a fill")
	txRate     = flag.Int("txrate", 200, "txpickup scenario: RunInTx transactions per second (one message each), for -samples x 10 messages")
	stmtStats  = flag.Bool("stats", false, "print the statements the txmq 1 msg/batch backlog ran, by kind, with their mean time")
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
	if *verbose {
		quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx := context.Background()
	pool := newPool(ctx, "bench")
	defer pool.Close()
	run := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		run[strings.TrimSpace(s)] = true
	}

	if run["rounds"] {
		runRounds(ctx)
	}

	if run["controls"] {
		runControls(ctx)
	}

	if run["riverprio"] {
		runRiverPrio(ctx)
	}

	if run["backlog"] {
		fmt.Printf("backlog burn-down: %d messages (one-per-batch scenarios %d), concurrency %d, pool %d connections, ANALYZE before consuming %v\n", *msgs, *msgs/5, *workers, *conns, *analyze)
		fmt.Printf("  one run each; txmq at concurrency %d on the pool both share (a plan guard with each statement), River tuned at its own MaxWorkers: for one message per batch, -only rounds is the comparison\n", *workers)
		tx100 := txmqBacklog(ctx, pool, *msgs, 100, "")
		fmt.Printf("  txmq sqljobs (100 msgs/batch): %9.0f msgs/s  (%7.0f batches/s)\n", tx100, tx100/100)
		tx1 := txmqBacklog(ctx, pool, *msgs/5, 1, *cpuProfile)
		fmt.Printf("  txmq sqljobs (1 msg/batch):    %9.0f msgs/s\n", tx1)
		rvDefault := riverBacklog(ctx, pool, *msgs/5, false)
		fmt.Printf("  river default config:          %9.0f jobs/s\n", rvDefault)
		rv := riverBacklog(ctx, pool, *msgs/5, true)
		fmt.Printf("  river tuned:                   %9.0f jobs/s  (%s)\n", rv, riverTuned())
		fmt.Printf("  ratio vs default river: txmq(100 msgs/batch) %.1fx, txmq(1 msg/batch) %.2fx\n", tx100/rvDefault, tx1/rvDefault)
		fmt.Printf("  ratio vs tuned river:   txmq(100 msgs/batch) %.1fx, txmq(1 msg/batch) %.2fx\n", tx100/rv, tx1/rv)
	}

	if run["latency"] {
		fmt.Printf("pickup latency: %d single messages to an idle consumer\n", *samples)
		p50, p99 := txmqLatency(ctx, pool, *samples)
		fmt.Printf("  txmq sqljobs: p50 %v  p99 %v  (publish buffer window 1 ms)\n", p50, p99)
		p50, p99 = riverLatency(ctx, pool, *samples, false)
		fmt.Printf("  river default: p50 %v  p99 %v\n", p50, p99)
		p50, p99 = riverLatency(ctx, pool, *samples, true)
		fmt.Printf("  river tuned:   p50 %v  p99 %v  (%s)\n", p50, p99, riverTuned())
	}

	if run["outbox"] {
		fmt.Printf("outbox cost (sqljobs backend, app database on the same Postgres):\n")
		for _, pace := range []time.Duration{0, *outboxPace} {
			fmt.Printf("  %s\n", txmqOutbox(ctx, pool, pace))
		}
		p50, p99 := txmqTxLatency(ctx, pool, *samples)
		fmt.Printf("  transactional pickup (RunInTx, publish to listener): p50 %v  p99 %v\n", p50, p99)
	}

	if run["txpickup"] {
		schema, drop := freshSchema(ctx, pool, "bench_txmq")
		be := txmqBackend(ctx, pool, schema)
		p50, p99, top := txmqbench.TxPickup(ctx, pool, be, *samples*10, *txRate, quiet)
		be.Close()
		drop()
		fmt.Printf("transactional pickup (sqljobs, RunInTx at %d/s, publish to listener, %d messages): p50 %v  p99 %v  max %v\n", *txRate, *samples*10, p50, p99, top)
	}

	if run["steady"] {
		fmt.Printf("steady publish: %d msgs/s for %v, concurrency %d, pickup latency (publish call to listener)\n", *rate, *steadyFor, *workers)
		t := txmqSteady(ctx, pool)
		fmt.Printf("  txmq sqljobs (buffer window 1 ms): %s\n", t)
		r := riverSteady(ctx, pool, false)
		fmt.Printf("  river default:                     %s\n", r)
		rt := riverSteady(ctx, pool, true)
		fmt.Printf("  river tuned:                       %s\n", rt)
	}

	if run["idle"] {
		fmt.Printf("idle cost: %d declared queues listened to, nothing published, measured over %v\n", *queues, *idleFor)
		t := txmqIdle(ctx)
		fmt.Printf("  txmq sqljobs: %s\n", t)
		r := riverIdle(ctx)
		fmt.Printf("  river:        %s\n", r)
		fmt.Printf("  ratio river/txmq: statements %.0fx, Postgres CPU %s, process CPU %s\n",
			float64(r.statements)/float64(max(t.statements, 1)), ratio(r.pgCPU, t.pgCPU), ratio(r.procCPU, t.procCPU))
	}
}

// analyzeTable runs ANALYZE on schema.table when -analyze is set.
func analyzeTable(ctx context.Context, pool *pgxpool.Pool, schema, table string) {
	if !*analyze {
		return
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, table}.Sanitize()); err != nil {
		log.Fatalf("ANALYZE %s.%s: %v", schema, table, err)
	}
}

// newPool opens a pool whose connections carry app as application_name.
func newPool(ctx context.Context, app string, tracers ...pgx.QueryTracer) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.MaxConns = int32(*conns)
	if len(tracers) > 0 {
		cfg.ConnConfig.Tracer = tracers[0]
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return pool
}

// benchMsg is the message the scenarios store.
type benchMsg = txmqbench.Msg

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
func txmqBacklog(ctx context.Context, pool *pgxpool.Pool, n, perBatch int, profile string) float64 {
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	var st *stmtTracer
	if *stmtStats && perBatch == 1 {
		st = &stmtTracer{kinds: map[string]*stmtKind{}}
		pool = newPool(ctx, "bench", st)
		defer pool.Close()
	}
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	reg, q, pubStats := txmqbench.Backlog(ctx, be, n, perBatch, *workers, quiet)
	want := int64((n + perBatch - 1) / perBatch)
	if pubStats.PublishedMessages != int64(n) {
		log.Fatalf("txmq: the publishing node stored %d of %d messages (%d batches); dropped %v, handed off %d",
			pubStats.PublishedMessages, n, pubStats.PublishedBatches, pubStats.Dropped, pubStats.HandedOff)
	}
	d, err := be.Depths(ctx, []string{"bench"})
	if err != nil {
		log.Fatal(err)
	}
	if d["bench"].Ready != want {
		log.Fatalf("txmq: %d batches ready after publishing, want %d", d["bench"].Ready, want)
	}
	analyzeTable(ctx, pool, schema, "txmq_jobs")
	var prof *os.File
	elapsed := txmqbench.BurnDown(ctx, be, reg, []*txmq.Queue[benchMsg]{q}, int64(n), quiet, func() {
		if profile != "" {
			var err error
			if prof, err = os.Create(profile); err != nil {
				log.Fatal(err)
			}
			if err := pprof.StartCPUProfile(prof); err != nil {
				log.Fatal(err)
			}
		}
		if st != nil {
			st.reset()
		}
	}, func() {
		if prof != nil {
			pprof.StopCPUProfile()
			_ = prof.Close()
		}
		if st != nil {
			st.print(n)
		}
	})
	return float64(n) / elapsed.Seconds()
}

// txmqLatency publishes single messages to an idle listening node and returns p50/p99 of the
// time from Publish to the listener.
func txmqLatency(ctx context.Context, pool *pgxpool.Pool, n int) (time.Duration, time.Duration) {
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	return txmqbench.Latency(ctx, be, n, quiet)
}

// txmqOutbox runs the outbox cost scenario on a fresh sqljobs schema.
func txmqOutbox(ctx context.Context, pool *pgxpool.Pool, pace time.Duration) txmqbench.CostResult {
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	return txmqbench.OutboxCost(ctx, pool, be, *rounds, pace, quiet)
}

// txmqTxLatency measures the transactional pickup latency on a fresh sqljobs schema.
func txmqTxLatency(ctx context.Context, pool *pgxpool.Pool, n int) (time.Duration, time.Duration) {
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	return txmqbench.TxLatency(ctx, pool, be, n, quiet)
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

// riverClient returns a River client working the default queue: at -workers (MaxWorkers)
// and River's default fetch settings, or tuned (see riverTuned).
func riverClient(ctx context.Context, pool *pgxpool.Pool, schema string, tuned bool, fn func(*river.Job[noopArgs])) *river.Client[pgx.Tx] {
	n := *workers
	if tuned {
		n = *rvWorkers
	}
	return riverClientQueues(ctx, pool, schema, tuned, []string{river.QueueDefault}, n, fn)
}

func riverClientQueues(ctx context.Context, pool *pgxpool.Pool, schema string, tuned bool, names []string, maxWorkers int, fn func(*river.Job[noopArgs])) *river.Client[pgx.Tx] {
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
	queuesConfig := make(map[string]river.QueueConfig, len(names))
	for _, name := range names {
		queuesConfig[name] = river.QueueConfig{MaxWorkers: maxWorkers}
	}
	cfg := &river.Config{
		Schema:  schema,
		Logger:  quiet,
		Queues:  queuesConfig,
		Workers: ws,
	}
	if tuned {
		// What River's own benchmark (cmd/river/riverbench) runs for throughput; see riverTuned.
		cfg.FetchCooldown = *rvCooldown
		cfg.FetchPollInterval = *rvPoll
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
	analyzeTable(ctx, pool, schema, "river_job")
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
	return txmqbench.Percentiles(out)
}

// steadyResult is one steady-publish run.
type steadyResult struct {
	published, delivered int
	lat                  []time.Duration
	batches              int64
}

func (r steadyResult) String() string {
	p50, p99 := txmqbench.Percentiles(r.lat)
	s := fmt.Sprintf("p50 %v  p99 %v  delivered %d/%d", p50, p99, r.delivered, r.published)
	if r.batches > 0 {
		s += fmt.Sprintf(" in %d batches", r.batches)
	}
	return s
}

// pace calls send rate times a second for d, passing each message's scheduled time: latency
// is measured from when a message was due to be published, so a publisher falling behind
// shows up in the figures instead of hiding them.
func pace(d time.Duration, send func(due time.Time)) int {
	n := int(d.Seconds() * float64(*rate))
	interval := time.Second / time.Duration(*rate)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		send(due)
	}
	return n
}

// collect gathers latencies until want arrived or a 30 s grace after publishing ended.
type collector struct {
	mu  sync.Mutex
	lat []time.Duration
	all chan struct{}
	n   atomic.Int64
}

func newCollector() *collector { return &collector{all: make(chan struct{})} }

func (c *collector) add(sent int64) {
	d := time.Since(time.Unix(0, sent))
	c.mu.Lock()
	c.lat = append(c.lat, d)
	c.mu.Unlock()
	c.n.Add(1)
}

func (c *collector) wait(want int) steadyResult {
	deadline := time.Now().Add(30 * time.Second)
	for c.n.Load() < int64(want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return steadyResult{published: want, delivered: len(c.lat), lat: append([]time.Duration(nil), c.lat...)}
}

func txmqSteady(ctx context.Context, pool *pgxpool.Pool) steadyResult {
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "steady", txmq.QueueConfig[int64]{Transactional: txmq.Try, MaxConcurrentBatches: txmq.Cap(*workers)})
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	col := newCollector()
	if err := q.Listen(node, func(_ context.Context, ms []int64) error {
		for _, sent := range ms {
			col.add(sent)
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
	n := pace(*steadyFor, func(due time.Time) {
		if err := q.Publish(ctx, node, due.UnixNano()); err != nil {
			log.Fatal(err)
		}
	})
	r := col.wait(n)
	r.batches = node.Stats().PublishedBatches
	return r
}

func riverSteady(ctx context.Context, pool *pgxpool.Pool, tuned bool) steadyResult {
	schema, drop := freshSchema(ctx, pool, "bench_river")
	defer drop()
	col := newCollector()
	c := riverClient(ctx, pool, schema, tuned, func(j *river.Job[noopArgs]) { col.add(j.Args.Sent) })
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)
	time.Sleep(300 * time.Millisecond)
	// Insert blocks on a round trip: a few inserters keep up with the pace.
	due := make(chan time.Time, 1024)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range due {
				if _, err := c.Insert(ctx, noopArgs{Sent: d.UnixNano()}, nil); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	n := pace(*steadyFor, func(d time.Time) { due <- d })
	close(due)
	wg.Wait()
	return col.wait(n)
}

// idleResult is one idle run's cost over the window.
type idleResult struct {
	statements int64
	pgCPU      time.Duration // -1: not measurable (Postgres is not local)
	procCPU    time.Duration
	window     time.Duration
}

func (r idleResult) String() string {
	per := r.window.Minutes()
	pg := "n/a (Postgres not local)"
	if r.pgCPU >= 0 {
		pg = r.pgCPU.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%6.0f statements/min, Postgres CPU %s, process CPU %v over %v",
		float64(r.statements)/per, pg, r.procCPU.Round(time.Millisecond), r.window)
}

func ratio(a, b time.Duration) string {
	if a < 0 || b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 1, 64) + "x"
}

// countingTracer counts the statements sent on a pool.
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// meter measures an idle window: statements on the tracer, CPU of the Postgres backends
// serving application_name app (read from /proc, so only for a local Postgres) and of this
// process.
func meter(ctx context.Context, app string, tr *countingTracer) idleResult {
	admin := newPool(ctx, "bench_admin")
	defer admin.Close()
	pgBefore := backendCPU(ctx, admin, app)
	procBefore := processCPU()
	stmts := tr.n.Load()
	time.Sleep(*idleFor)
	r := idleResult{statements: tr.n.Load() - stmts, procCPU: processCPU() - procBefore, window: *idleFor, pgCPU: -1}
	pgAfter := backendCPU(ctx, admin, app)
	if pgBefore != nil && pgAfter != nil {
		r.pgCPU = 0
		for pid, t := range pgAfter {
			r.pgCPU += t - pgBefore[pid] // a backend opened during the window counts whole
		}
	}
	return r
}

// backendCPU returns the CPU time of each Postgres backend serving app, or nil when /proc
// does not show them (Postgres on another host or in a container).
func backendCPU(ctx context.Context, admin *pgxpool.Pool, app string) map[int]time.Duration {
	rows, err := admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		log.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		log.Fatal(err)
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		// Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[int(pid)] = time.Duration(ut+st) * time.Second / 100 // USER_HZ
	}
	return out
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func queueNames() []string {
	names := make([]string, *queues)
	for i := range names {
		names[i] = fmt.Sprintf("q%04d", i)
	}
	return names
}

func txmqIdle(ctx context.Context) idleResult {
	const app = "bench_idle_txmq"
	tr := &countingTracer{}
	pool := newPool(ctx, app, tr)
	defer pool.Close()
	schema, drop := freshSchema(ctx, pool, "bench_txmq")
	defer drop()
	be := txmqBackend(ctx, pool, schema)
	defer be.Close()
	reg := txmq.NewRegistry()
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range queueNames() {
		q := txmq.MustDeclareIn(reg, name, txmq.QueueConfig[int]{Transactional: txmq.Try, MaxConcurrentBatches: txmq.Cap(1)})
		if err := q.Listen(node, func(context.Context, []int) error { return nil }); err != nil {
			log.Fatal(err)
		}
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	time.Sleep(3 * time.Second) // start-up: migrations, first heartbeats, LISTEN
	return meter(ctx, app, tr)
}

func riverIdle(ctx context.Context) idleResult {
	const app = "bench_idle_river"
	tr := &countingTracer{}
	pool := newPool(ctx, app, tr)
	defer pool.Close()
	schema, drop := freshSchema(ctx, pool, "bench_river")
	defer drop()
	c := riverClientQueues(ctx, pool, schema, false, queueNames(), 1, func(*river.Job[noopArgs]) {})
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)
	time.Sleep(3 * time.Second)
	return meter(ctx, app, tr)
}

// stmtTracer sorts the statements of a pool by kind (their first distinctive words).
type stmtTracer struct {
	mu    sync.Mutex
	kinds map[string]*stmtKind
}

type stmtKind struct {
	n     int
	total time.Duration
}

type stmtStart struct {
	kind string
	at   time.Time
}

type stmtKey struct{}

func (t *stmtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, stmtKey{}, stmtStart{stmtKindOf(d.SQL), time.Now()})
}

// TraceBatchStart times a pipelined batch (sqljobs sends its plan guard and the statement
// together) as one statement of the batch's last query's kind.
func (t *stmtTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	kind := "batch"
	if qs := d.Batch.QueuedQueries; len(qs) > 0 {
		kind = stmtKindOf(qs[len(qs)-1].SQL)
	}
	return context.WithValue(ctx, stmtKey{}, stmtStart{kind, time.Now()})
}

func (t *stmtTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (t *stmtTracer) TraceBatchEnd(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.TraceQueryEnd(ctx, c, pgx.TraceQueryEndData{})
}

// stmtKindOf names a statement by what it does.
func stmtKindOf(sql string) string {
	kind := strings.Join(strings.Fields(sql), " ")
	for _, k := range []string{"txmq_jobs_exclusive AS x", "DELETE FROM", "UPDATE", "INSERT INTO", "count(*) FILTER", "txmq_jobs_queues"} {
		if strings.Contains(kind, k) {
			kind = k
			break
		}
	}
	if kind == "txmq_jobs_exclusive AS x" {
		kind = "claim"
	}
	return kind
}

func (t *stmtTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	s, _ := ctx.Value(stmtKey{}).(stmtStart)
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.kinds[s.kind]
	if k == nil {
		k = &stmtKind{}
		t.kinds[s.kind] = k
	}
	k.n++
	k.total += time.Since(s.at)
}

func (t *stmtTracer) reset() {
	t.mu.Lock()
	t.kinds = map[string]*stmtKind{}
	t.mu.Unlock()
}

func (t *stmtTracer) print(msgs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for kind, k := range t.kinds {
		if len(kind) > 40 {
			kind = kind[:40]
		}
		fmt.Printf("    %-40s %7d statements (%.2f per message), mean %v\n", kind, k.n, float64(k.n)/float64(msgs), (k.total / time.Duration(k.n)).Round(time.Microsecond))
	}
}
