package txmqbench

import (
	"context"
	"log"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
)

// WaitReady waits until the ready batches of queues on be add up to at least want (a
// publisher's writes may still be landing on a cluster), checking every 20 ms.
func WaitReady(ctx context.Context, be txmq.Backend, queues []string, want int64) {
	for {
		d, err := be.Depths(ctx, queues)
		if err != nil {
			log.Fatal(err)
		}
		var ready int64
		for _, x := range d {
			ready += x.Ready
		}
		if ready >= want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BurnDown starts a node of reg on be listening to qs with a no-op listener and returns how
// long it took, from its Start, to deliver total messages (fatal after 5 minutes). started
// and finished, if not nil, run just before the node starts and as soon as the last message
// is delivered, before the node closes (a profile, CPU readings).
func BurnDown[T any](ctx context.Context, be txmq.Backend, reg *txmq.Registry, qs []*txmq.Queue[T], total int64, logger *slog.Logger, started, finished func()) time.Duration {
	var got atomic.Int64
	done := make(chan struct{})
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range qs {
		if err := q.Listen(node, func(_ context.Context, ms []T) error {
			if got.Add(int64(len(ms))) == total {
				close(done)
			}
			return nil
		}); err != nil {
			log.Fatal(err)
		}
	}
	if started != nil {
		started()
	}
	start := time.Now()
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		log.Fatalf("txmq: delivered %d of %d", got.Load(), total)
	}
	elapsed := time.Since(start)
	if finished != nil {
		finished()
	}
	_ = node.Close(ctx)
	return elapsed
}
