package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/internal/engine"
	"github.com/txmq/txmq/internal/envelope"

	"github.com/txmq/txmq/core"
)

// startWork hands a claim to the node's worker as the driver would.
func startWork(n *txmq.Node, c *core.Claim) chan struct{} {
	return engine.Of(n).DeliverAsync(c)
}

// TestLeaseLostCancelsTheListener: when an extension reports the lease lost, the listener's
// context is cancelled with cause ErrLeaseLost and this node neither retries nor acks it.
func TestLeaseLostCancelsTheListener(t *testing.T) {
	t.Parallel()
	n, fb := newTestNode(t, &txmq.NodeOptions{Lease: 200 * time.Millisecond})
	fb.ExtendErr = fmt.Errorf("fake: %w", core.ErrLeaseLost)
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	causes := make(chan error, 1)
	_ = q.Listen(n, func(ctx context.Context, _ []int) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-startWork(n, &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 0, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(200 * time.Millisecond)})
	if c := <-causes; !errors.Is(c, core.ErrLeaseLost) {
		t.Fatalf("listener context cause %v, want ErrLeaseLost", c)
	}
	acked, retried, dropped := fb.Counts()
	if acked+retried+dropped != 0 || n.Stats().LeaseLost != 1 {
		t.Fatalf("acked %d retried %d dropped %d leaseLost %d; want nothing settled and one lease lost", acked, retried, dropped, n.Stats().LeaseLost)
	}
}

// TestCloseReleasesListenersPastTheDeadline: listeners still running when Close's ctx ends are
// cancelled and their batches released at once (delay 0) with the run given back, while the
// lease keeps being extended during the wait.
func TestCloseReleasesListenersPastTheDeadline(t *testing.T) {
	t.Parallel()
	n, fb := newTestNode(t, &txmq.NodeOptions{Lease: time.Second})
	q := txmq.MustDeclareIn(n.Registry(), "q", txmq.QueueConfig[int]{Transactional: txmq.Try})
	_ = q.Listen(n, func(ctx context.Context, _ []int) error { <-ctx.Done(); return ctx.Err() })
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// attempt 1 in the body and a first delivery: this is run 2.
	done := startWork(n, &core.Claim{Queue: "q", ID: "b", Body: batchBody(t, 1, "1"), Deliveries: 1, LeaseUntil: time.Now().Add(time.Second)})
	waitFor(t, "the run", func() bool { return n.Stats().Runs == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if err := n.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want a deadline error", err)
	}
	<-done
	fb.Mu.Lock()
	defer fb.Mu.Unlock()
	if len(fb.Retried) != 1 || fb.Extends == 0 {
		t.Fatalf("retried %d, extended %d; want one release and extensions during the wait", len(fb.Retried), fb.Extends)
	}
	r := fb.Retried[0]
	if e, err := envelope.Decode(r.Body); err != nil || e.Attempt != 1 || r.Delay != 0 {
		t.Fatalf("released with delay %v, body %+v (%v); want delay 0 and attempt 1 (run 2 given back)", r.Delay, e, err)
	}
}
