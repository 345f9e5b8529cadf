// Command redis compares txmq's Redis backend with Asynq (github.com/hibiken/asynq) doing no-op
// work on the same Redis at the same concurrency, and with a raw go-redis loop doing the same
// round trips per batch, side by side in one run:
//
//	go run ./redis -addr 127.0.0.1:6379
//
// Scenarios: burning down a backlog (txmq with 100-message batches, txmq with one message per
// batch, Asynq with one task per message, the raw loop), pickup latency of single messages
// published to idle consumers (p50/p99), the idle cost of a node listening on 1,000 empty
// queues (process and server CPU, server commands/s, then pickup latency on those queues; run
// it on a Redis of its own: -only idle), and the outbox cost (a business transaction alone vs
// inside Store.RunInTx or with Store.WithTx, interleaved, on the Postgres at -url, with the
// transactional pickup latency). -only freeze runs apart: RunInTx calls with a 2 s deadline
// while a Redis server of its own is frozen with SIGSTOP; -only cluster runs apart too: the
// same backlog spread over queues burnt down on -addr and on the Redis Cluster at -cluster,
// interleaved, as a ratio; -only txpickup runs apart: the transactional pickup latency (RunInTx
// with one publish, -txrate a second, publish to listener: p50/p99/max). Every scenario uses its own key prefix or queue name
// and deletes its keys afterwards: the server may be shared, so it never flushes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq"
	txredis "github.com/txmq/txmq/adapters/redis"
	"github.com/txmq/txmq/bench/internal/txmqbench"
)

var (
	addr        = flag.String("addr", "127.0.0.1:6379", "Redis host:port")
	msgs        = flag.Int("n", 20000, "messages in the backlog scenarios")
	workers     = flag.Int("workers", 50, "concurrency: Asynq Concurrency, txmq MaxConcurrentBatches, raw loop goroutines")
	samples     = flag.Int("samples", 200, "pickup latency samples")
	only        = flag.String("only", "", "comma-separated scenarios to run (tx100,raw100,tx1,raw1,asynq,latency,idle,outbox); empty: all of those; \"freeze\" alone runs the frozen-backend scenario on a Redis server of its own; \"cluster\" alone compares burn-down on -addr and on the Redis Cluster at -cluster")
	idleQs      = flag.Int("idle-queues", 1000, "empty queues of the idle scenario")
	idleFor     = flag.Duration("idle-for", 20*time.Second, "how long the idle scenario measures")
	dbURL       = flag.String("url", envOr("TXMQ_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "outbox scenario: the app's Postgres URL")
	rounds      = flag.Int("rounds", 2000, "outbox scenario: interleaved rounds (one call of each kind per round)")
	redisServer = flag.String("redis-server", "redis-server", "freeze scenario: the redis-server binary it starts (on a free port) and freezes")
	freezeFor   = flag.Duration("freeze", 10*time.Second, "freeze scenario: how long the server stays frozen (SIGSTOP)")
	txRate      = flag.Int("txrate", 200, "txpickup scenario: RunInTx transactions per second (one message each), for -samples x 10 messages")
	outboxPace  = flag.Duration("pace", 5*time.Millisecond, "outbox scenario: the pause before each call in its paced run (after a back-to-back run)")
	cpuprof     = flag.String("cpuprofile", "", "write a CPU profile of the tx1 scenario's consuming phase to this file")
	stats       = flag.Bool("stats", false, "print Redis commands per batch (INFO commandstats) for tx1 and raw1")
	clusterU    = flag.String("cluster", envOr("TXMQ_REDIS_CLUSTER_URL", ""), "cluster scenario: the Redis Cluster's redis+cluster:// URL")
	clusterQs   = flag.Int("cluster-queues", 12, "cluster scenario: queues the backlog is spread over")
	clusterRuns = flag.Int("cluster-rounds", 3, "cluster scenario: interleaved rounds (single server, then cluster)")
)

func want(s string) bool {
	if *only == "" {
		return true
	}
	for _, o := range strings.Split(*only, ",") {
		if o == s {
			return true
		}
	}
	return false
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// benchMsg is the message the scenarios store.
type benchMsg = txmqbench.Msg

func main() {
	flag.Parse()
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: *addr})
	defer rdb.Close()

	if *only == "freeze" { // only on request: it starts and freezes a Redis server of its own
		freezeScenario(ctx)
		return
	}
	if *only == "cluster" { // only on request: it needs a Redis Cluster (-cluster)
		clusterScenario(ctx, *clusterU, *clusterQs, *msgs, *clusterRuns)
		return
	}
	if want("idle") {
		idleCost(ctx, rdb, *idleQs, *idleFor, *samples)
		if *only == "idle" {
			return
		}
	}
	if *only == "txpickup" { // only on request: RunInTx at a steady rate, publish to listener
		txPickupScenario(ctx, rdb)
		return
	}
	if want("outbox") {
		outboxScenario(ctx, rdb)
		if *only == "outbox" {
			return
		}
	}
	fmt.Printf("backlog burn-down: %d messages, concurrency %d, Redis %s\n", *msgs, *workers, *addr)
	var tx100, raw100, tx1, raw1, aq float64
	if want("tx100") {
		tx100 = txmqBacklog(ctx, rdb, *msgs, 100)
		fmt.Printf("  txmq redis (100 msgs/batch): %9.0f msgs/s  (%7.0f batches/s)\n", tx100, tx100/100)
	}
	if want("raw100") {
		raw100 = rawBacklog(ctx, rdb, *msgs, 100)
		fmt.Printf("  raw go-redis (100 msgs/batch): %7.0f msgs/s\n", raw100)
	}
	if want("tx1") {
		before := commandStats(ctx, rdb)
		tx1 = txmqBacklog(ctx, rdb, *msgs/4, 1)
		fmt.Printf("  txmq redis (1 msg/batch):    %9.0f msgs/s\n", tx1)
		printStats(ctx, rdb, before, *msgs/4)
	}
	if want("raw1") {
		before := commandStats(ctx, rdb)
		raw1 = rawBacklog(ctx, rdb, *msgs/4, 1)
		fmt.Printf("  raw go-redis (1 msg/batch):  %9.0f msgs/s\n", raw1)
		printStats(ctx, rdb, before, *msgs/4)
	}
	if want("asynq") {
		aq = asynqBacklog(ctx, rdb, *msgs/4)
		fmt.Printf("  asynq (1 task/msg):          %9.0f msgs/s\n", aq)
	}
	printRatios(tx100, tx1, aq, raw100, raw1)

	if !want("latency") {
		return
	}
	fmt.Printf("pickup latency: %d single messages to an idle consumer\n", *samples)
	p50, p99 := txmqLatency(ctx, rdb, *samples)
	fmt.Printf("  txmq redis:     p50 %v  p99 %v  (publish buffer window 1 ms)\n", p50, p99)
	a50, a99 := asynqLatency(ctx, rdb, *samples, 0)
	fmt.Printf("  asynq default:  p50 %v  p99 %v  (TaskCheckInterval 1 s)\n", a50, a99)
	t50, t99 := asynqLatency(ctx, rdb, *samples, 10*time.Millisecond)
	fmt.Printf("  asynq tuned:    p50 %v  p99 %v  (TaskCheckInterval 10 ms)\n", t50, t99)
}

// commandStats reads the server's cumulative calls per command (INFO commandstats) and its
// socket reads (see readsKey).
const readsKey = "~reads"

// deleteKeys removes every key matching pattern (never FLUSHALL: the server is shared).
func deleteKeys(ctx context.Context, rdb *goredis.Client, pattern string) {
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		_ = rdb.Del(ctx, keys[:n]...).Err()
		keys = keys[n:]
	}
}

func uniq(prefix string) string { return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()) }

func txmqBackend(rdb *goredis.Client, prefix string) *txredis.Backend {
	be, err := txredis.New(&txredis.Options{Client: rdb, Prefix: prefix, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	return be
}

// txmqBacklog stores n messages (perBatch per batch) before any consumer runs, then times one
// node with MaxConcurrentBatches=workers draining them; it returns messages/s.
func txmqBacklog(ctx context.Context, rdb *goredis.Client, n, perBatch int) float64 {
	prefix := uniq("benchtx")
	defer deleteKeys(ctx, rdb, "{"+prefix+":*")
	be := txmqBackend(rdb, prefix)
	defer be.Close()
	reg, q, _ := txmqbench.Backlog(ctx, be, n, perBatch, *workers, quiet)
	txmqbench.WaitReady(ctx, be, []string{"bench"}, int64((n+perBatch-1)/perBatch))
	meter := cpuMeter{rdb: rdb}
	elapsed := txmqbench.BurnDown(ctx, be, reg, []*txmq.Queue[benchMsg]{q}, int64(n), quiet, func() {
		if perBatch == 1 && *cpuprof != "" {
			f, err := os.Create(*cpuprof)
			if err != nil {
				log.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				log.Fatal(err)
			}
		}
		meter.start(ctx)
	}, func() {
		meter.stop(ctx, n)
		if perBatch == 1 && *cpuprof != "" {
			pprof.StopCPUProfile()
		}
	})
	meter.print()
	return float64(n) / elapsed.Seconds()
}

// The raw loop's scripts: the least a correct leased queue on Redis does per batch (claim
// with a lease, ack), in the same data layout and round trips as txmq (one claim script per
// fetch, one ack script per batch), without txmq's engine around it.
var (
	rawClaim = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[3], now + 30000, id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id)
end
return out`)
	rawAck = goredis.NewScript(`
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`)
)

// rawBacklog stores n messages as JSON arrays of perBatch messages, then times workers
// goroutines that each claim one batch, decode it and ack it, until all are done.
func rawBacklog(ctx context.Context, rdb *goredis.Client, n, perBatch int) float64 {
	tag := "{" + uniq("benchraw") + ":bench}"
	keys := []string{tag + ":due", tag + ":body", tag + ":lease"}
	defer deleteKeys(ctx, rdb, tag+":*")
	pipe := rdb.Pipeline()
	batches := 0
	for i := 0; i < n; i += perBatch {
		ms := make([]benchMsg, 0, perBatch)
		for j := i; j < min(n, i+perBatch); j++ {
			ms = append(ms, benchMsg{ID: j})
		}
		body, _ := json.Marshal(ms)
		id := fmt.Sprintf("b%d", i)
		pipe.HSet(ctx, keys[1], id, body)
		pipe.ZAdd(ctx, keys[0], goredis.Z{Score: 0, Member: id})
		if batches++; batches%500 == 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		log.Fatal(err)
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range *workers {
		wg.Go(func() {
			for got.Load() < int64(n) {
				vals, err := rawClaim.Run(ctx, rdb, keys, 1).StringSlice()
				if err != nil {
					log.Fatal(err)
				}
				if len(vals) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				var ms []benchMsg
				if err := json.Unmarshal([]byte(vals[1]), &ms); err != nil {
					log.Fatal(err)
				}
				if err := rawAck.Run(ctx, rdb, keys, vals[0]).Err(); err != nil {
					log.Fatal(err)
				}
				got.Add(int64(len(ms)))
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

func txmqLatency(ctx context.Context, rdb *goredis.Client, n int) (time.Duration, time.Duration) {
	prefix := uniq("benchtxl")
	defer deleteKeys(ctx, rdb, "{"+prefix+":*")
	be := txmqBackend(rdb, prefix)
	defer be.Close()
	return txmqbench.Latency(ctx, be, n, quiet)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// outboxScenario prints the outbox cost and the transactional pickup latency with the Redis
// backend, the app database being the Postgres at -url.
func outboxScenario(ctx context.Context, rdb *goredis.Client) {
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	fmt.Printf("outbox cost (redis backend, app database %s):\n", pool.Config().ConnConfig.Host)
	prefix := uniq("benchtxo")
	defer deleteKeys(ctx, rdb, "{"+prefix+":*")
	be := txmqBackend(rdb, prefix)
	for _, pace := range []time.Duration{0, *outboxPace} {
		fmt.Printf("  %s\n", txmqbench.OutboxCost(ctx, pool, be, *rounds, pace, quiet))
	}
	_ = be.Close()
	prefix2 := uniq("benchtxo")
	defer deleteKeys(ctx, rdb, "{"+prefix2+":*")
	be2 := txmqBackend(rdb, prefix2)
	defer be2.Close()
	p50, p99 := txmqbench.TxLatency(ctx, pool, be2, *samples, quiet)
	fmt.Printf("  transactional pickup (RunInTx, publish to listener): p50 %v  p99 %v\n", p50, p99)
}

// txPickupScenario prints the transactional pickup latency at -txrate RunInTx calls a second
// with the Redis backend, the app database being the Postgres at -url.
func txPickupScenario(ctx context.Context, rdb *goredis.Client) {
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	prefix := uniq("benchtxp")
	defer deleteKeys(ctx, rdb, "{"+prefix+":*")
	be := txmqBackend(rdb, prefix)
	defer be.Close()
	p50, p99, top := txmqbench.TxPickup(ctx, pool, be, *samples*10, *txRate, quiet)
	fmt.Printf("transactional pickup (redis, RunInTx at %d/s, publish to listener, %d messages): p50 %v  p99 %v  max %v\n", *txRate, *samples*10, p50, p99, top)
}

// printRatios prints the ratios whose two sides ran (a side that did not run is 0).
func printRatios(tx100, tx1, aq, raw100, raw1 float64) {
	var parts []string
	if tx100 > 0 && aq > 0 {
		parts = append(parts, fmt.Sprintf("txmq(100)/asynq %.1fx", tx100/aq))
	}
	if tx1 > 0 && aq > 0 {
		parts = append(parts, fmt.Sprintf("txmq(1)/asynq %.2fx", tx1/aq))
	}
	if tx100 > 0 && raw100 > 0 {
		parts = append(parts, fmt.Sprintf("txmq/raw at 100 msgs/batch %.0f%%", 100*tx100/raw100))
	}
	if tx1 > 0 && raw1 > 0 {
		parts = append(parts, fmt.Sprintf("txmq/raw at 1 msg/batch %.0f%%", 100*tx1/raw1))
	}
	if len(parts) > 0 {
		fmt.Printf("  ratios: %s\n", strings.Join(parts, ", "))
	}
}
