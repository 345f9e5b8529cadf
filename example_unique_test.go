package txmq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
)

// A queue of invoice reminders, unique per invoice until the reminder is done: publishing the
// same invoice again while a reminder waits or runs is left out (no error; counted in
// Stats.Deduplicated), and once it is done the next publish runs again.
func ExampleUnique() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	reminders := txmq.MustDeclareIn(reg, "invoice-reminders", txmq.QueueConfig[string]{
		Transactional: txmq.Try,
		Unique:        txmq.Unique{Mode: txmq.UniqueUntilDone},
	})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		panic(err)
	}
	defer app.Close(ctx)
	_ = app.Node.Start(ctx)
	_ = reminders.Publish(ctx, app.Node, "remind #1 (first)", txmq.UniqueKey("invoice-1"))
	_ = reminders.Publish(ctx, app.Node, "remind #1 (again)", txmq.UniqueKey("invoice-1"))
	_ = reminders.Publish(ctx, app.Node, "remind #2", txmq.UniqueKey("invoice-2"))
	for app.Node.Stats().Buffered > 0 {
		time.Sleep(time.Millisecond) // until the flush reached the backend
	}
	runs := make(chan string, 3)
	_ = reminders.Listen(app.Node, func(ctx context.Context, msgs []string) error {
		runs <- msgs[0]
		return nil
	})
	got := map[string]bool{<-runs: true, <-runs: true}
	fmt.Println(got["remind #1 (first)"], got["remind #2"], app.Node.Stats().Deduplicated)
	// Output:
	// true true 1
}
