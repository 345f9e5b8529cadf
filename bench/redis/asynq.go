package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/bench/internal/txmqbench"
)

// The Asynq baseline: the same burn-down and pickup latency through Asynq on the same Redis.

func cleanupAsynq(ctx context.Context, rdb *goredis.Client, queue string) {
	_ = asynq.NewInspectorFromRedisClient(rdb).DeleteQueue(queue, true)
	deleteKeys(ctx, rdb, "asynq:{"+queue+"}:*")
	_ = rdb.SRem(ctx, "asynq:queues", queue).Err()
}

// asynqBacklog enqueues n tasks before the server starts, then times it draining them with
// Concurrency=workers.
func asynqBacklog(ctx context.Context, rdb *goredis.Client, n int) float64 {
	queue := uniq("benchaq")
	defer cleanupAsynq(ctx, rdb, queue)
	client := asynq.NewClientFromRedisClient(rdb)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				payload, _ := json.Marshal(benchMsg{ID: int(i)})
				if _, err := client.EnqueueContext(ctx, asynq.NewTask("noop", payload), asynq.Queue(queue)); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	var got atomic.Int64
	done := make(chan struct{})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(_ context.Context, t *asynq.Task) error {
		var m benchMsg
		_ = json.Unmarshal(t.Payload(), &m)
		if got.Add(1) == int64(n) {
			close(done)
		}
		return nil
	})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: *workers, Queues: map[string]int{queue: 1}, Logger: nopLogger{}, LogLevel: asynq.FatalLevel})
	meter := cpuMeter{rdb: rdb}
	meter.start(ctx)
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		log.Fatalf("asynq: processed %d of %d", got.Load(), n)
	}
	elapsed := time.Since(start)
	meter.stop(ctx, n)
	srv.Shutdown()
	meter.print()
	return float64(n) / elapsed.Seconds()
}

// txmqLatency publishes single messages to an idle listening node and returns p50/p99 of the
// time from Publish to the listener.

// asynqLatency enqueues single tasks to an idle server and returns p50/p99 of the time from
// Enqueue to the handler; check is the server's TaskCheckInterval (0: Asynq's default).
func asynqLatency(ctx context.Context, rdb *goredis.Client, n int, check time.Duration) (time.Duration, time.Duration) {
	queue := uniq("benchaql")
	defer cleanupAsynq(ctx, rdb, queue)
	lat := make(chan time.Duration, n)
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(_ context.Context, t *asynq.Task) error {
		var sent int64
		_ = json.Unmarshal(t.Payload(), &sent)
		lat <- time.Since(time.Unix(0, sent))
		return nil
	})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: *workers, Queues: map[string]int{queue: 1},
		TaskCheckInterval: check, Logger: nopLogger{}, LogLevel: asynq.FatalLevel})
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	client := asynq.NewClientFromRedisClient(rdb)
	time.Sleep(300 * time.Millisecond)
	var out []time.Duration
	for range n {
		payload, _ := json.Marshal(time.Now().UnixNano())
		if _, err := client.EnqueueContext(ctx, asynq.NewTask("noop", payload), asynq.Queue(queue)); err != nil {
			log.Fatal(err)
		}
		out = append(out, <-lat)
		time.Sleep(10 * time.Millisecond)
	}
	return txmqbench.Percentiles(out)
}

type nopLogger struct{}

func (nopLogger) Debug(...any) {}
func (nopLogger) Info(...any)  {}
func (nopLogger) Warn(...any)  {}
func (nopLogger) Error(...any) {}
func (nopLogger) Fatal(args ...any) {
	log.Fatal(strings.TrimSpace(fmt.Sprintln(args...)))
}
