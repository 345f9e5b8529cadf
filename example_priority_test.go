package txmq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
)

// A queue whose password resets overtake the newsletter backlog: higher priority first, and
// with aging, so a newsletter waits at most 9*PriorityAging (here 9 minutes) behind password
// resets that keep coming.
func ExamplePriority() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	emails := txmq.MustDeclareIn(reg, "emails", txmq.QueueConfig[string]{
		Transactional: txmq.Try,
		Prioritized:   true,
		PriorityAging: time.Minute,
		Exclusive:     true, // one batch at a time, to show the order
	})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		panic(err)
	}
	defer app.Close(ctx)
	_ = app.Node.Start(ctx)
	// DefaultPriority 0, the lowest; publishes of different priorities never share a batch.
	_ = emails.PublishMany(ctx, app.Node, []string{"newsletter 1", "newsletter 2"})
	_ = emails.Publish(ctx, app.Node, "password reset", txmq.Priority(txmq.MaxPriority))
	for d, _ := app.Node.Depths(ctx); d[emails.Name()].Ready < 2; d, _ = app.Node.Depths(ctx) {
		time.Sleep(time.Millisecond) // until both batches are stored
	}
	done := make(chan struct{}, 2)
	_ = emails.Listen(app.Node, func(ctx context.Context, msgs []string) error {
		fmt.Println(msgs)
		done <- struct{}{}
		return nil
	})
	<-done
	<-done
	// Output:
	// [password reset]
	// [newsletter 1 newsletter 2]
}
