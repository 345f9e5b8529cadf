package txmqbench

import (
	"context"
	"log"
	"log/slog"
	"time"

	"github.com/txmq/txmq"
)

// Msg is the message the backlog scenarios store.
type Msg struct {
	ID int `json:"id"`
}

// Backlog declares the queue "bench" in a new registry (perBatch messages per batch, at most
// workers batches at once per node), stores n messages on be through a node of its own in
// chunks of 1000, closes that node, and returns the registry and the queue (for BurnDown) with
// the publishing node's stats. It exits the program on an error.
func Backlog(ctx context.Context, be txmq.Backend, n, perBatch, workers int, logger *slog.Logger) (*txmq.Registry, *txmq.Queue[Msg], txmq.Stats) {
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "bench", txmq.QueueConfig[Msg]{Transactional: txmq.Try, MaxBatchMessages: perBatch, MaxConcurrentBatches: txmq.Cap(workers)})
	pub, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: logger, FlushWindow: time.Millisecond, FlushTick: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := pub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	chunk := make([]Msg, 0, 1000)
	for i := range n {
		chunk = append(chunk, Msg{ID: i})
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
	return reg, q, pub.Stats()
}
