package memory_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

// New makes an in-process backend; every node given the same *Backend shares its queues, as
// nodes in separate processes share a Redis or an SQS queue.
func ExampleNew() {
	ctx := context.Background()
	be := memory.New(nil)
	defer be.Close()

	reg := txmq.NewRegistry()
	jobs := txmq.MustDeclareIn(reg, "jobs", txmq.QueueConfig[int]{Transactional: txmq.Never})

	var mu sync.Mutex
	sum, seen := 0, 0
	done := make(chan struct{})
	work := func(ctx context.Context, msgs []int) error {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range msgs {
			sum += n
			if seen++; seen == 4 {
				close(done)
			}
		}
		return nil
	}
	var nodes []*txmq.Node
	for range 2 { // two nodes on one backend
		node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg})
		if err != nil {
			log.Fatal(err)
		}
		if err := jobs.Listen(node, work); err != nil {
			log.Fatal(err)
		}
		if err := node.Start(ctx); err != nil {
			log.Fatal(err)
		}
		nodes = append(nodes, node)
	}
	if err := jobs.PublishMany(ctx, nodes[0], []int{1, 2, 3, 4}); err != nil {
		log.Fatal(err)
	}
	<-done
	for _, node := range nodes {
		_ = node.Close(ctx)
	}
	fmt.Println("sum:", sum)
	// Output: sum: 10
}
