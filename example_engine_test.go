package txmq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

type Invoice struct {
	ID     int    `json:"id"`
	Amount int64  `json:"amount_cents"`
	Email  string `json:"email"`
}

// Declaring a queue validates its config at once; a bad one is an error that names the queue.
func ExampleDeclare() {
	reg := txmq.NewRegistry()
	invoices, err := txmq.DeclareIn(reg, "invoices", txmq.QueueConfig[Invoice]{
		Transactional:        txmq.Try,
		MaxConcurrentBatches: txmq.Cap(4),
		MaxAttempts:          3,
	})
	fmt.Println(invoices.Name(), err)

	_, err = txmq.DeclareIn(reg, "reports", txmq.QueueConfig[string]{
		Transactional:        txmq.Never,
		Exclusive:            true,
		MaxConcurrentBatches: txmq.Cap(2),
	})
	fmt.Println(errors.Is(err, txmq.ErrInvalidConfig))
	// Output:
	// invoices <nil>
	// true
}

// A node publishes and consumes; a listener gets a slice of messages.
func ExampleQueue_Listen() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	invoices := txmq.MustDeclareIn(reg, "invoices", txmq.QueueConfig[Invoice]{Transactional: txmq.Try})

	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	if err != nil {
		panic(err)
	}

	var mu sync.Mutex
	var got []int
	done := make(chan struct{})
	_ = invoices.Listen(node, func(ctx context.Context, msgs []Invoice) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, m.ID)
		}
		if len(got) == 3 {
			close(done)
		}
		return nil
	})
	_ = node.Start(ctx)
	_ = invoices.PublishMany(ctx, node, []Invoice{{ID: 1}, {ID: 2}, {ID: 3}})
	<-done
	_ = node.Close(ctx)
	slices.Sort(got) // delivery order is not promised
	fmt.Println(got)
	// Output: [1 2 3]
}

// Delayed messages are never delivered early, on any backend.
func ExampleAfter() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	reminders := txmq.MustDeclareIn(reg, "reminders", txmq.QueueConfig[string]{Transactional: txmq.Never})
	backend := memory.New(nil)
	defer backend.Close()
	node, _ := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	arrived := make(chan time.Time, 1)
	_ = reminders.Listen(node, func(ctx context.Context, msgs []string) error {
		arrived <- time.Now()
		return nil
	})
	_ = node.Start(ctx)
	start := time.Now()
	_ = reminders.Publish(ctx, node, "pay the invoice", txmq.After(200*time.Millisecond))
	fmt.Println((<-arrived).Sub(start) >= 200*time.Millisecond)
	_ = node.Close(ctx)
	// Output: true
}

// A message that does not survive a JSON round trip is refused at the call site.
func ExampleQueue_Publish_invalidPayload() {
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "anything", txmq.QueueConfig[any]{Transactional: txmq.Try})
	backend := memory.New(nil)
	defer backend.Close()
	node, _ := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg})
	err := q.Publish(context.Background(), node, make(chan int))
	fmt.Println(errors.Is(err, txmq.ErrInvalidPayload))
	_ = node.Close(context.Background())
	// Output: true
}
