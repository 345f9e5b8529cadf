package txmq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
)

// A run that passes its queue's RunTimeout has its ctx cancelled with a cause wrapping
// ErrRunTimeout; the failed run is retried (one run of the budget spent). A listener that
// ignored its ctx past RunTimeoutGrace would be declared failed without its return, its stack
// logged and its slot freed.
func ExampleQueueConfig_runTimeout() {
	ctx := context.Background()
	reg := txmq.NewRegistry()
	reports := txmq.MustDeclareIn(reg, "example-reports", txmq.QueueConfig[string]{
		Transactional:   txmq.Never,
		RunTimeout:      100 * time.Millisecond, // default 30 min; NoRunTimeout: none
		RunTimeoutGrace: 200 * time.Millisecond, // default a tenth of RunTimeout
	})
	backend := memory.New(nil)
	defer backend.Close()
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	if err != nil {
		log.Fatal(err)
	}
	var runs atomic.Int32
	done := make(chan struct{})
	err = reports.Listen(node, func(ctx context.Context, msgs []string) error {
		run := runs.Add(1)
		if run == 1 {
			<-ctx.Done() // a slow report: it stops when its ctx says so
			fmt.Println("run 1 timed out:", errors.Is(context.Cause(ctx), txmq.ErrRunTimeout))
			return ctx.Err()
		}
		fmt.Println("run", run, "built", msgs[0])
		close(done)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := reports.Publish(ctx, node, "monthly"); err != nil {
		log.Fatal(err)
	}
	<-done
	_ = node.Close(ctx)
	fmt.Println("timed out runs:", node.Stats().TimedOut, "stuck:", node.Stats().Stuck)
	// Output:
	// run 1 timed out: true
	// run 2 built monthly
	// timed out runs: 1 stuck: 0
}
