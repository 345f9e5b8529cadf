package txmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/adapters/memory"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// TestInspectorRunNow: RunNow makes the delayed batches of a queue due now, and a started
// node runs them at once; it needs a queue and a waiting state, and says when the backend
// cannot.
func TestInspectorRunNow(t *testing.T) {
	t.Parallel()
	reg := txmq.NewRegistry()
	q := txmq.MustDeclareIn(reg, "runnow", txmq.QueueConfig[string]{Transactional: txmq.Try})
	be := memory.New(nil)
	n, err := txmq.NewNode(be, &txmq.NodeOptions{Registry: reg, Logger: txmqtest.DiscardLogger(), PollWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	ran := make(chan string, 10)
	if err := q.Listen(n, func(_ context.Context, msgs []string) error {
		for _, m := range msgs {
			ran <- m
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := q.PublishMany(ctx, n, []string{"a", "b"}, txmq.IDs("w-1", "w-2"), txmq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	in := n.Inspector()
	txmqtest.Eventually(t, 10*time.Second, func() bool {
		ms, err := in.List(ctx, txmq.MessageFilter{Queue: "runnow", State: core.StateDelayed})
		return err == nil && len(ms) == 2
	}, "the 2 delayed messages stored")
	res, err := in.RunNow(ctx, txmq.MessageFilter{Queue: "runnow", State: core.StateDelayed})
	if err != nil || res != (txmq.BulkResult{Done: 2}) {
		t.Fatalf("RunNow(delayed) = %+v, %v; want 2 done", res, err)
	}
	for range 2 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("the expedited batch did not run")
		}
	}
	for _, f := range []txmq.MessageFilter{{State: core.StateDelayed}, {Queue: "runnow", State: core.StateQueued}} {
		if _, err := in.RunNow(ctx, f); !errors.Is(err, txmq.ErrInvalidConfig) {
			t.Errorf("RunNow(%+v): %v; want ErrInvalidConfig", f, err)
		}
	}
	if _, err := txmq.NewInspector(nil, opaque{be}).RunNow(ctx, txmq.MessageFilter{Queue: "runnow", State: core.StateDelayed}); !errors.Is(err, txmq.ErrLookupUnsupported) {
		t.Errorf("RunNow on a backend without BatchExpediter: %v", err)
	}
}
