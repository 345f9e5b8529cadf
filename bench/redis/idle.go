package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/bench/internal/txmqbench"
)

// idleCost starts one node listening on queues empty queues (the node's default PollWait,
// 1 s), lets it settle, then measures over d what the idle node costs: this process's CPU,
// the Redis server's CPU and the commands it ran per second (INFO commandstats, which counts
// the commands inside scripts; other clients of a shared server are counted too, so run it
// on a server of its own). Then it measures pickup latency of samples single messages, each
// published to a random one of the idle queues (p50/p99).
func idleCost(ctx context.Context, rdb *goredis.Client, queues int, d time.Duration, samples int) {
	prefix := uniq("benchidle")
	defer deleteKeys(ctx, rdb, "{"+prefix+":*")
	be := txmqBackend(rdb, prefix)
	defer be.Close()
	reg := txmq.NewRegistry()
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	lat := make(chan time.Duration, samples)
	qs := make([]*txmq.Queue[int64], queues)
	for i := range qs {
		qs[i] = txmq.MustDeclareIn(reg, fmt.Sprintf("idle%04d", i), txmq.QueueConfig[int64]{Transactional: txmq.Try})
		if err := qs[i].Listen(node, func(_ context.Context, ms []int64) error {
			for _, sent := range ms {
				lat <- time.Since(time.Unix(0, sent))
			}
			return nil
		}); err != nil {
			log.Fatal(err)
		}
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)
	time.Sleep(3 * time.Second) // subscriptions and first looks
	cpu0, srv0, cmd0, t0 := processCPU(), serverCPU(ctx, rdb), totalCalls(ctx, rdb), time.Now()
	time.Sleep(d)
	cpu1, srv1, cmd1, el := processCPU(), serverCPU(ctx, rdb), totalCalls(ctx, rdb), time.Since(t0)
	fmt.Printf("idle cost: %d empty queues, one node (PollWait 1 s), over %v\n", queues, d)
	fmt.Printf("  process CPU %.2f%% of a core, Redis CPU %.2f%% of a core, all in %.2f%%; Redis %.0f commands/s (%.2f per queue-second)\n",
		100*(cpu1-cpu0).Seconds()/el.Seconds(), 100*(srv1-srv0)/el.Seconds(),
		100*((cpu1-cpu0).Seconds()+srv1-srv0)/el.Seconds(),
		float64(cmd1-cmd0)/el.Seconds(), float64(cmd1-cmd0)/el.Seconds()/float64(queues))
	var out []time.Duration
	for range samples {
		q := qs[rand.IntN(len(qs))]
		if err := q.Publish(ctx, node, time.Now().UnixNano()); err != nil {
			log.Fatal(err)
		}
		out = append(out, <-lat)
		time.Sleep(10 * time.Millisecond)
	}
	p50, p99 := txmqbench.Percentiles(out)
	fmt.Printf("  pickup latency, %d single messages to random idle queues: p50 %v  p99 %v\n", samples, p50, p99)
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the Redis server's user and system CPU seconds so far (INFO cpu).
func serverCPU(ctx context.Context, rdb *goredis.Client) float64 {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		log.Fatal(err)
	}
	var s float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			s += f
		}
	}
	return s
}

// totalCalls sums the calls of every command in INFO commandstats.
func totalCalls(ctx context.Context, rdb *goredis.Client) int64 {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		log.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
	}
	return n
}
