package txmq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
)

// A queue shared by tenants: one tenant's import of a thousand rows does not hold back
// another tenant's one report. The backend hands out batches round-robin across the
// fairness keys, so the lone tenant's batch runs second, not last.
func ExampleFairKey() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	jobs := txmq.MustDeclareIn(reg, "tenant-jobs", txmq.QueueConfig[string]{
		Transactional:    txmq.Try,
		Fair:             true,
		Exclusive:        true, // one batch at a time, to show the order
		MaxBatchMessages: 1,
	})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		panic(err)
	}
	defer app.Close(ctx)
	_ = app.Node.Start(ctx)
	rows := make([]string, 1000)
	for i := range rows {
		rows[i] = fmt.Sprint("acme row ", i)
	}
	_ = jobs.PublishMany(ctx, app.Node, rows, txmq.FairKey("acme"))
	_ = jobs.Publish(ctx, app.Node, "globex report", txmq.FairKey("globex"))
	for d, _ := app.Node.Depths(ctx); d[jobs.Name()].Ready < 1001; d, _ = app.Node.Depths(ctx) {
		time.Sleep(time.Millisecond) // until every batch is stored
	}
	runs := make(chan string, 1001)
	_ = jobs.Listen(app.Node, func(ctx context.Context, msgs []string) error {
		runs <- msgs[0]
		return nil
	})
	<-runs // an acme row: acme's turn came first
	fmt.Println(<-runs)
	// Output:
	// globex report
}
