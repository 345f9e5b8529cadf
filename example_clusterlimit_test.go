package txmq_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/txmq/txmq"
)

// A payment provider accepts 2 calls at once for the whole app: ClusterLimit 2 keeps at most 2
// batches of the queue running across every node sharing the backend (here three nodes on one
// memory backend), whatever each node could run.
func ExampleQueueConfig_clusterLimit() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	charges := txmq.MustDeclareIn(reg, "charges", txmq.QueueConfig[string]{
		Transactional:    txmq.Try,
		ClusterLimit:     2,
		MaxBatchMessages: 1,
	})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		panic(err)
	}
	defer app.Close(ctx)
	var mu sync.Mutex
	running, peak := 0, 0
	var done sync.WaitGroup
	done.Add(12)
	listener := func(ctx context.Context, msgs []string) error {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // ... call the provider ...
		mu.Lock()
		running--
		mu.Unlock()
		done.Done()
		return nil
	}
	nodes := []*txmq.Node{app.Node}
	for range 2 { // two more nodes on the same backend
		n, err := txmq.NewNode(app.Backend, &txmq.NodeOptions{Registry: reg})
		if err != nil {
			panic(err)
		}
		defer n.Close(ctx)
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		_ = charges.Listen(n, listener)
		_ = n.Start(ctx)
	}
	for i := range 12 {
		_ = charges.Publish(ctx, app.Node, fmt.Sprint("charge ", i))
	}
	done.Wait()
	fmt.Println("never more than 2 at once:", peak <= 2)
	// Output:
	// never more than 2 at once: true
}
