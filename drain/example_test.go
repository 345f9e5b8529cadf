package drain_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/drain"
)

// New swaps backends without losing work: the node publishes to the new backend and keeps
// running what is left in the old one until it is empty. (Apps get this from the settings:
// TXMQ_BACKEND=new, TXMQ_DRAIN_BACKENDS=old.)
func ExampleNew() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	emails := txmq.MustDeclareIn(reg, "emails", txmq.QueueConfig[string]{Transactional: txmq.Never})

	// Yesterday's backend, with work left in it.
	oldBackend := memory.New(nil)
	oldNode, err := txmq.NewNode(oldBackend, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	if err := emails.Publish(ctx, oldNode, "left in the old backend"); err != nil {
		log.Fatal(err)
	}
	_ = oldNode.Close(ctx) // flushes; the batch stays in oldBackend

	// Today's node: publishes to the new backend, consumes from both.
	be := drain.New(memory.New(nil), []txmq.Backend{oldBackend}, nil)
	defer be.Close() // closes both backends
	node, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	if err := emails.Listen(node, func(ctx context.Context, msgs []string) error {
		mu.Lock()
		defer mu.Unlock()
		if got = append(got, msgs...); len(got) == 2 {
			close(done)
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := emails.Publish(ctx, node, "published to the new backend"); err != nil {
		log.Fatal(err)
	}
	<-done
	_ = node.Close(ctx)
	slices.Sort(got)
	fmt.Println(got[0])
	fmt.Println(got[1])
	// Output:
	// left in the old backend
	// published to the new backend
}
