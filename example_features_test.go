package txmq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/txmq/txmq"
)

// A listener reads the ids of the messages it got; here the publisher gave its own.
func ExampleMessageIDs() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	orders := txmq.MustDeclareIn(reg, "orders", txmq.QueueConfig[string]{Transactional: txmq.Try})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		panic(err)
	}
	defer app.Close(ctx)
	got := make(chan string, 1)
	_ = orders.Listen(app.Node, func(ctx context.Context, msgs []string) error {
		got <- fmt.Sprint(txmq.MessageIDs(ctx), msgs)
		return nil
	})
	_ = app.Node.Start(ctx)
	if err := orders.Publish(ctx, app.Node, "placed", txmq.ID("order-42")); err != nil {
		panic(err)
	}
	fmt.Println(<-got)
	// Output: [order-42] [placed]
}

// A nightly report, published once per night however many nodes run (it needs the app
// database: TXMQ_DATABASE_URL). Compiled, not run.
func ExampleQueue_Schedule() {
	type Report struct{ Day string }
	reports := txmq.MustDeclare("reports", txmq.QueueConfig[Report]{Transactional: txmq.Require})
	berlin, _ := time.LoadLocation("Europe/Berlin")
	err := reports.Schedule("nightly-report", txmq.ScheduleConfig[Report]{
		Cron:     "0 2 * * *", // 02:00 every day, Berlin time
		Location: berlin,
		Messages: func(tick time.Time) []Report { return []Report{{Day: tick.AddDate(0, 0, -1).Format("2006-01-02")}} },
		Missed:   txmq.RunMissedOnce, // a night missed while the app was down is sent at start
	})
	if err != nil {
		panic(err)
	}
}

// A queue that calls a rate-limited API: at most 20 calls a second across the app.
func ExampleRateLimit() {
	type Call struct{ URL string }
	calls := txmq.MustDeclare("partner-api", txmq.QueueConfig[Call]{
		Transactional:    txmq.Try,
		MaxBatchMessages: 1, // one call per batch: the limit counts batches
		RateLimit:        txmq.RateLimit{Batches: 20, Per: time.Second},
	})
	fmt.Println(calls.Name())
	// Output: partner-api
}

// An account's ledger entries, handled in the order they were published, one batch per
// account at a time; other accounts run in parallel.
func ExampleKey() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	ledger := txmq.MustDeclareIn(reg, "ledger", txmq.QueueConfig[string]{Transactional: txmq.Try, Ordered: true, MaxBatchMessages: 1})
	app, err := txmq.Open(ctx, &txmq.Config{Backend: "memory://", Node: txmq.NodeOptions{Registry: reg}})
	if err != nil {
		panic(err)
	}
	defer app.Close(ctx)
	got := make(chan string, 3)
	_ = ledger.Listen(app.Node, func(ctx context.Context, entries []string) error {
		for _, e := range entries {
			got <- e
		}
		return nil
	})
	_ = app.Node.Start(ctx)
	for _, e := range []string{"open", "deposit 10", "withdraw 5"} {
		if err := ledger.Publish(ctx, app.Node, e, txmq.Key("acct-42")); err != nil {
			panic(err)
		}
	}
	fmt.Println(<-got, "/", <-got, "/", <-got)
	// Output: open / deposit 10 / withdraw 5
}
