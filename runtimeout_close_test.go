package txmq_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/txmqtest"
)

// TestStuckRunDoesNotHoldClose: once the hard step declared a hung run failed, Close does not
// wait for its goroutine, and the hook saw the soft and the hard step.
func TestStuckRunDoesNotHoldClose(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "stuck-close", txmq.QueueConfig[int]{Transactional: txmq.Never,
		RunTimeout: 50 * time.Millisecond, RunTimeoutGrace: 50 * time.Millisecond, MaxAttempts: 1})
	backend := memory.New(nil)
	defer backend.Close()
	steps := make(chan bool, 4)
	node, err := txmq.NewNode(backend, &txmq.NodeOptions{Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: &txmq.Hooks{TimedOut: func(_ string, _ int, stuck bool) { steps <- stuck }}})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	if err := q.Listen(node, func(context.Context, []int) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(ctx, node, 1); err != nil {
		t.Fatal(err)
	}
	if soft, hard := <-steps, <-steps; soft || !hard {
		t.Fatalf("TimedOut hook saw stuck=%v then stuck=%v; want false then true", soft, hard)
	}
	txmqtest.Eventually(t, 10*time.Second, func() bool { return node.Stats().Dropped[txmq.ReasonDeliveryExhausted] == 1 }, "the stuck run's batch dead-lettered")
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := node.Close(cctx); err != nil {
		t.Fatalf("Close with a stuck listener after its hard step: %v; want nil", err)
	}
	if s := node.Stats(); s.TimedOut != 1 || s.Stuck != 1 || s.InFlight != 0 {
		t.Fatalf("Stats %+v; want TimedOut 1, Stuck 1, nothing in flight", s)
	}
}
