package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq"
	txredis "github.com/txmq/txmq/adapters/redis"
	"github.com/txmq/txmq/bench/internal/txmqbench"
	"github.com/txmq/txmq/outbox"
)

// freezeScenario starts a Redis server of its own (never the shared one) on a free port, has
// an app call RunInTx with one publish every 10 ms, each with a 2 s deadline, freezes the
// server (SIGSTOP) for -freeze, thaws it (SIGCONT) and waits until every committed message
// was delivered. It prints the calls' durations and rate during the freeze and what was lost.
func freezeScenario(ctx context.Context) {
	port := freePort()
	dir, err := os.MkdirTemp("", "txmq-freeze")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := exec.Command(*redisServer, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := srv.Start(); err != nil {
		log.Fatalf("starting %s: %v", *redisServer, err)
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGCONT); _ = srv.Process.Kill(); _ = srv.Wait() }()
	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer rdb.Close()
	for i := 0; rdb.Ping(ctx).Err() != nil; i++ {
		if i > 100 {
			log.Fatal("the scenario's Redis did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	be, err := txredis.New(&txredis.Options{Client: rdb, Prefix: uniq("benchfz"), Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer be.Close()
	schema := fmt.Sprintf("bench_freeze_%d", time.Now().UnixNano())
	defer pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	o := &outbox.Options{Schema: schema, Backend: be, Logger: quiet, RecoveryAge: 3 * time.Second, SweepInterval: time.Second, BackoffBase: time.Second}
	if err := outbox.Migrate(ctx, pool, o); err != nil {
		log.Fatal(err)
	}
	store, err := outbox.New(pool, o)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Start(ctx); err != nil {
		log.Fatal(err)
	}
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "freeze", txmq.QueueConfig[int]{Transactional: txmq.Require})
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, Handoff: store})
	if err != nil {
		log.Fatal(err)
	}
	seen := make([]atomic.Bool, 1<<20)
	if err := q.Listen(node, func(_ context.Context, ms []int) error {
		for _, m := range ms {
			seen[m].Store(true)
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}

	type call struct {
		took   time.Duration
		frozen bool
	}
	var (
		calls     []call
		committed []int
		failed    int
		isFrozen  atomic.Bool
	)
	publish := func(n int) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		fz := isFrozen.Load()
		start := time.Now()
		err := store.RunInTx(cctx, func(ctx context.Context, _ pgx.Tx) error { return q.Publish(ctx, node, n) })
		calls = append(calls, call{time.Since(start), fz})
		if err != nil {
			failed++
			return
		}
		committed = append(committed, n)
	}
	phase := func(d time.Duration, n *int) {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			publish(*n)
			*n++
			time.Sleep(10 * time.Millisecond)
		}
	}
	n := 0
	phase(2*time.Second, &n)
	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		log.Fatal(err)
	}
	isFrozen.Store(true)
	frozenFrom := n
	phase(*freezeFor, &n)
	frozenCalls := n - frozenFrom
	isFrozen.Store(false)
	if err := srv.Process.Signal(syscall.SIGCONT); err != nil {
		log.Fatal(err)
	}
	phase(2*time.Second, &n)
	deadline := time.Now().Add(2 * time.Minute)
	missing := func() int {
		m := 0
		for _, k := range committed {
			if !seen[k].Load() {
				m++
			}
		}
		return m
	}
	for missing() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = node.Close(cctx)
	_ = store.Close(cctx)
	var during []time.Duration
	for _, c := range calls {
		if c.frozen {
			during = append(during, c.took)
		}
	}
	p50, p99 := txmqbench.Percentiles(during)
	fmt.Printf("backend frozen (SIGSTOP) for %v, RunInTx + 1 publish every 10 ms with a 2 s deadline:\n", *freezeFor)
	fmt.Printf("  during the freeze: %d calls (%.1f calls/s), p50 %v  p99 %v  max %v\n",
		frozenCalls, float64(frozenCalls)/freezeFor.Seconds(), p50, p99, slices.Max(during).Round(time.Millisecond))
	fmt.Printf("  overall: %d calls, %d committed, %d failed; committed but not delivered 2 min after the thaw: %d\n",
		len(calls), len(committed), failed, missing())
}

// freePort returns a TCP port that was free a moment ago.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
