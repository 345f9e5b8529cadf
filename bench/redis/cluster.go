package main

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq"
	txredis "github.com/txmq/txmq/adapters/redis"
	"github.com/txmq/txmq/bench/internal/txmqbench"
	"github.com/txmq/txmq/core"
)

// clusterScenario burns down the same backlog on the single server (-addr) and on the Redis
// Cluster (-cluster, a redis+cluster:// URL), interleaved rounds times, and prints messages/s
// of each and their ratio. The backlog is spread over queues queues (a queue lives on one
// master: a cluster spreads queues, not one queue), 1 message per batch so that the servers,
// not the process, are the bound; one node drains all of them with MaxConcurrentBatches
// workers per queue.
func clusterScenario(ctx context.Context, clusterURL string, queues, n, rounds int) {
	if clusterURL == "" {
		log.Fatal("-only cluster needs -cluster redis+cluster://host1:port1,... (or TXMQ_REDIS_CLUSTER_URL)")
	}
	fmt.Printf("cluster vs single server: %d messages over %d queues, 1 msg/batch, concurrency %d per queue, %d interleaved rounds\n", n, queues, *workers, rounds)
	var single, cluster []float64
	for r := range rounds {
		s := spreadBacklog(ctx, func(prefix string) *txredis.Backend {
			be, err := txredis.New(&txredis.Options{Addr: *addr, Prefix: prefix, Logger: quiet})
			if err != nil {
				log.Fatal(err)
			}
			return be
		}, queues, n)
		c := spreadBacklog(ctx, func(prefix string) *txredis.Backend {
			u, err := url.Parse(clusterURL)
			if err != nil {
				log.Fatal(err)
			}
			q := u.Query()
			q.Set("txmq_prefix", prefix)
			u.RawQuery = q.Encode()
			b, err := core.OpenBackend(ctx, u.String())
			if err != nil {
				log.Fatal(err)
			}
			return b.(*txredis.Backend)
		}, queues, n)
		fmt.Printf("  round %d: single server %9.0f msgs/s, cluster %9.0f msgs/s, cluster/single %.2fx\n", r+1, s, c, c/s)
		single, cluster = append(single, s), append(cluster, c)
	}
	var ss, cs float64
	for i := range single {
		ss += single[i]
		cs += cluster[i]
	}
	fmt.Printf("  mean: single server %.0f msgs/s, cluster %.0f msgs/s, cluster/single %.2fx\n", ss/float64(rounds), cs/float64(rounds), cs/ss)
}

// spreadBacklog stores n messages over queues queues (1 per batch) before any consumer runs,
// then times one node draining them all; it returns messages/s. open makes a Backend with the
// given key prefix; its keys are deleted afterwards on every master.
func spreadBacklog(ctx context.Context, open func(prefix string) *txredis.Backend, queues, n int) float64 {
	prefix := uniq("benchspread")
	be := open(prefix)
	defer be.Close()
	defer deleteEverywhere(ctx, be.Client(), "{"+prefix+":*")
	reg := txmq.NewRegistry()
	qs := make([]*txmq.Queue[benchMsg], queues)
	names := make([]string, queues)
	for i := range qs {
		names[i] = fmt.Sprintf("spread%02d", i)
		qs[i] = txmq.MustDeclareIn(reg, names[i], txmq.QueueConfig[benchMsg]{Transactional: txmq.Try, MaxBatchMessages: 1, MaxConcurrentBatches: txmq.Cap(*workers)})
	}
	pub, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: quiet, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := pub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	per := n / queues
	for i, q := range qs {
		chunk := make([]benchMsg, per)
		for j := range chunk {
			chunk[j] = benchMsg{ID: i*per + j}
		}
		if err := q.PublishMany(ctx, pub, chunk); err != nil {
			log.Fatal(err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		log.Fatal(err)
	}
	total := int64(per * queues)
	txmqbench.WaitReady(ctx, be, names, total)
	elapsed := txmqbench.BurnDown(ctx, be, reg, qs, total, quiet, nil, nil)
	return float64(total) / elapsed.Seconds()
}

// deleteEverywhere deletes the keys matching pattern: on every master of a cluster (SCAN sees
// one node's keys; one UNLINK per key, as a prefix's keys span slots), else on the server.
func deleteEverywhere(ctx context.Context, c goredis.UniversalClient, pattern string) {
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		deleteKeys(ctx, c.(*goredis.Client), pattern)
		return
	}
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		iter := m.Scan(ctx, 0, pattern, 1000).Iterator()
		pipe := m.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val())
		}
		if pipe.Len() > 0 {
			_, _ = pipe.Exec(ctx)
		}
		return iter.Err()
	})
}
