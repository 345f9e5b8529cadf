// Package txmqbench holds the measurements the benchmark programs share, so txmq is measured
// the same way on every backend.
package txmqbench

import (
	"context"
	"log"
	"log/slog"
	"slices"
	"time"

	"github.com/txmq/txmq"
)

// Latency publishes n single messages, one at a time, to an idle node listening on be, and
// returns the p50 and p99 of the time from Publish to the listener (the node's publish window
// is 1 ms).
func Latency(ctx context.Context, be txmq.Backend, n int, logger *slog.Logger) (time.Duration, time.Duration) {
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "lat", txmq.QueueConfig[int64]{Transactional: txmq.Try})
	opts := &txmq.NodeOptions{Registry: reg, Logger: logger, FlushWindow: time.Millisecond, FlushTick: time.Millisecond}
	return pickup(ctx, q, be, opts, n, func(ctx context.Context, node *txmq.Node) error {
		return q.Publish(ctx, node, time.Now().UnixNano())
	})
}

// pickup starts a node with opts listening on q, then n times calls publish, which publishes
// its clock reading (UnixNano) on q, and waits for the listener to get it; it returns the p50
// and p99 of the time from that reading to the listener.
func pickup(ctx context.Context, q *txmq.Queue[int64], be txmq.Backend, opts *txmq.NodeOptions, n int, publish func(ctx context.Context, node *txmq.Node) error) (time.Duration, time.Duration) {
	node, err := txmq.NewNode(be, opts)
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
		if err := publish(ctx, node); err != nil {
			log.Fatal(err)
		}
		out = append(out, <-lat)
		time.Sleep(10 * time.Millisecond)
	}
	return Percentiles(out)
}

// Percentiles sorts d and returns its p50 and p99, rounded to 10 µs.
func Percentiles(d []time.Duration) (time.Duration, time.Duration) {
	slices.Sort(d)
	r := func(p float64) time.Duration {
		return d[min(len(d)-1, int(p*float64(len(d))))].Round(10 * time.Microsecond)
	}
	return r(0.50), r(0.99)
}
