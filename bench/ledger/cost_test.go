package ledger_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/redis"
	"github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/txmqtest/testenv"
)

type benchMsg struct {
	ID    int    `json:"id"`
	Email string `json:"email"`
}

// benchVariants are the ledger settings every benchmark compares, in this order: the
// ledger off, on, and on in ledger mode.
var benchVariants = []string{"off", "on", "mode"}

// benchBackends are the backends the benchmarks run on: SQL jobs (in a fresh schema of the
// test database) and Redis (TXMQ_REDIS_URL, under a fresh key prefix).
var benchBackends = []string{"sqljobs", "redis"}

// benchRig is one node on one backend with one ledger variant, listening on queue "bench"
// (100 messages per batch). Every listener run sends its message ids and start time on runs.
type benchRig struct {
	pool   *pgxpool.Pool // the app database (the ledger's)
	schema string        // the ledger's (and SQL jobs') schema
	n      *txmq.Node
	q      *txmq.Queue[benchMsg]
	lg     *ledger.Ledger // nil with the ledger off
	mode   bool
	runs   chan benchRun
	done   []func() // closers, run in reverse by close
}

// benchRun is one listener run: when it started and the ids of its messages.
type benchRun struct {
	at  time.Time
	ids []string
}

// newBenchRig opens the backend, the ledger (unless variant is "off") and a started node;
// close stops them and drops the schema (the rounds of a benchmark would hold too many
// connections if the pools waited for b.Cleanup).
func newBenchRig(b *testing.B, backend, variant string) *benchRig {
	b.Helper()
	ctx := context.Background()
	pool := benchPool(b)
	schema := testenv.UniqueName("txmq_t_")
	r := &benchRig{pool: pool, schema: schema, mode: variant == "mode", runs: make(chan benchRun, 1<<16)}
	r.done = append(r.done, pool.Close, func() {
		_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	be, closeBe := openBenchBackend(b, backend, schema)
	r.done = append(r.done, closeBe)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := &txmq.NodeOptions{Registry: txmq.NewRegistry(), Logger: logger, PollWait: 100 * time.Millisecond}
	if variant != "off" {
		lo := &ledger.Options{Schema: schema, Logger: logger, Mode: r.mode}
		if err := ledger.Migrate(ctx, pool, lo); err != nil {
			b.Fatal(err)
		}
		lg, err := ledger.New(pool, lo)
		if err != nil {
			b.Fatal(err)
		}
		r.done = append(r.done, func() { _ = lg.Close(ctx) })
		r.lg, opts.Ledger = lg, lg
	}
	r.q = txmq.MustDeclareIn(opts.Registry, "bench", txmq.QueueConfig[benchMsg]{Transactional: txmq.Try, MaxBatchMessages: 100})
	n, err := txmq.NewNode(be, opts)
	if err != nil {
		b.Fatal(err)
	}
	r.n = n
	if err := r.q.Listen(n, func(ctx context.Context, _ []benchMsg) error {
		r.runs <- benchRun{at: time.Now(), ids: txmq.MessageIDs(ctx)}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		b.Fatal(err)
	}
	r.done = append(r.done, func() { _ = n.Close(ctx) })
	return r
}

// close closes the node, the ledger and the backend.
func (r *benchRig) close() {
	for i := len(r.done) - 1; i >= 0; i-- {
		r.done[i]()
	}
}

// benchPool returns a new pool on the test database; the caller closes it.
func benchPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	return pool
}

// openBenchBackend opens backend with its own connections, as one opened from TXMQ_BACKEND
// has, kept apart from other runs by uniq (a schema, a key prefix), and returns it with its
// closer.
func openBenchBackend(b *testing.B, backend, uniq string) (core.Backend, func()) {
	b.Helper()
	ctx := context.Background()
	var (
		be     core.Backend
		err    error
		closer = func() {}
	)
	switch backend {
	case "sqljobs":
		pool := benchPool(b)
		closer = pool.Close
		if err := sqljobs.Migrate(ctx, pool, &sqljobs.Options{Schema: uniq}); err != nil {
			b.Fatal(err)
		}
		be, err = sqljobs.New(ctx, pool, &sqljobs.Options{Schema: uniq})
	case "redis":
		u, perr := url.Parse(testenv.RedisURL(b))
		if perr != nil {
			b.Fatal(perr)
		}
		q := u.Query()
		q.Set("txmq_prefix", uniq)
		u.RawQuery = q.Encode()
		be, err = redis.Open(ctx, u)
	default:
		err = fmt.Errorf("unknown backend %q", backend)
	}
	if err != nil {
		closer()
		b.Fatal(err)
	}
	return be, func() { _ = be.Close(); closer() }
}

// await reads runs until want distinct messages were delivered (a batch may run twice: at
// least once) or 5 minutes passed.
func (r *benchRig) await(b *testing.B, seen map[string]bool, want int) {
	b.Helper()
	timeout := time.After(5 * time.Minute)
	for len(seen) < want {
		select {
		case run := <-r.runs:
			for _, id := range run.ids {
				seen[id] = true
			}
		case <-timeout:
			b.Fatalf("delivered %d of %d", len(seen), want)
		}
	}
}

// settled waits until the ledger recorded every message's completion (the completed batch
// rows hold them all: one cheap query per poll, so the wait measures the ledger, not a
// listing) and, in ledger mode, no batch is kept any more (outside the timing: the last
// completions are recorded after their acks, a moment after the listener).
func (r *benchRig) settled(b *testing.B, total int) {
	b.Helper()
	if r.lg == nil {
		return
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var done int
		err := r.pool.QueryRow(ctx, `SELECT coalesce(sum(messages), 0) FROM `+pgx.Identifier{r.schema, "txmq_ledger_states"}.Sanitize()+
			` WHERE queue = 'bench' AND state = 'completed'`).Scan(&done)
		if err == nil && done >= total {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("ledger: %d messages of completed batches, %v; want %d (ledger stats %+v)", done, err, total, r.lg.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for r.mode {
		k, err := r.lg.KeptBatches(ctx)
		if err == nil && k == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("ledger mode: %d batches still kept, %v; want 0", k, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchRounds is how many rounds of every variant BenchmarkLedgerCost runs: on a shared
// machine one round's ratio swings by a factor of two, the median of interleaved rounds
// much less.
const benchRounds = 5

// BenchmarkLedgerCost measures the ledger's cost on the whole path, on SQL jobs and on Redis:
// for each backend, one node publishes b.N messages, 100 per PublishMany call and per batch,
// and waits until every one was delivered, with the ledger off, on, and on in ledger mode in
// turn (fresh schema and key prefix each), benchRounds rounds interleaved (each round starts
// with the next variant). It reports each variant's median msgs/s (until the last listener
// run, and until the ledger recorded every completion: "settled"), the app database's
// write-ahead log bytes per message, and the medians of the rounds' throughput ratios on/off
// and mode/off. b.N counts messages: run it once with a fixed count,
//
//	go test -run '^$' -bench LedgerCost -benchtime 200000x ./ledger
func BenchmarkLedgerCost(b *testing.B) {
	for _, backend := range benchBackends {
		b.Run(backend, func(b *testing.B) {
			type result struct{ rate, settled, wal float64 }
			got := map[string][]result{}
			ratios := map[string][]float64{}
			for round := range benchRounds {
				res := map[string]result{}
				for k := range benchVariants {
					v := benchVariants[(round+k)%len(benchVariants)]
					var r result
					r.rate, r.settled, r.wal = benchThroughput(b, backend, v)
					res[v] = r
					got[v] = append(got[v], r)
				}
				for _, v := range benchVariants[1:] {
					ratios[v] = append(ratios[v], res[v].rate/res["off"].rate)
					ratios[v+"-settled"] = append(ratios[v+"-settled"], res[v].settled/res["off"].settled)
				}
			}
			for _, v := range benchVariants {
				var rate, settled, wal []float64
				for _, r := range got[v] {
					rate, settled, wal = append(rate, r.rate), append(settled, r.settled), append(wal, r.wal)
				}
				b.ReportMetric(median(rate), v+"-msgs/s")
				// Until the ledger recorded every completion too (and, in ledger mode, settled
				// every batch): what a sustained load could keep up with.
				b.ReportMetric(median(settled), v+"-settled-msgs/s")
				// The app database's write-ahead log written meanwhile, per message: the write
				// amplification (the database is shared, so other writers add noise).
				b.ReportMetric(median(wal), v+"-WAL-B/msg")
			}
			for _, v := range benchVariants[1:] {
				b.ReportMetric(median(ratios[v]), v+"/off")
				b.ReportMetric(median(ratios[v+"-settled"]), v+"/off-settled")
			}
		})
	}
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchThroughput runs one variant over b.N messages and returns its msgs/s until the last
// listener run and until the ledger settled everything, and the app database's write-ahead
// log per message.
func benchThroughput(b *testing.B, backend, variant string) (rate, settledRate, walPerMsg float64) {
	b.StopTimer()
	r := newBenchRig(b, backend, variant)
	defer r.close()
	ctx := context.Background()
	msgs := make([]benchMsg, 100)
	for i := range msgs {
		msgs[i] = benchMsg{ID: i, Email: "someone@example.com"}
	}
	var walStart string
	if err := r.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&walStart); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	for sent := 0; sent < b.N; sent += len(msgs) {
		if err := r.q.PublishMany(ctx, r.n, msgs[:min(len(msgs), b.N-sent)]); err != nil {
			b.Fatal(err)
		}
	}
	r.await(b, map[string]bool{}, b.N)
	elapsed := time.Since(start)
	b.StopTimer()
	r.settled(b, b.N)
	settled := time.Since(start)
	rate = float64(b.N) / elapsed.Seconds()
	settledRate = float64(b.N) / settled.Seconds()
	var wal float64
	if err := r.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, walStart).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	return rate, settledRate, wal / float64(b.N)
}
