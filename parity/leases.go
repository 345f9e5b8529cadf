package parity

import (
	"context"
	"errors"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

func init() {
	register("leases",
		property{name: "crashed_node_batch_reaches_another", run: crashedNodeBatchMoves},
		property{name: "long_listener_keeps_lease", run: longListenerKeepsLease},
		property{name: "lost_lease_settle_errors", run: lostLeaseSettleErrors},
		property{name: "ack_twice_noop", run: ackTwiceNoop},
	)
}

// crashedNodeBatchMoves: a node that dies while running a batch (no settle) loses its lease,
// and another node gets and finishes the batch.
func crashedNodeBatchMoves(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	rec, ok := newRecorder(), newRecorder()
	started := make(chan struct{}, 4)
	a := x.node(txmq.NodeOptions{})
	listen(x, rec, q, a, func(ctx context.Context, _ []Msg) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	keys := publishKeys(x, q, a, "crash", 3, 3)
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("node A never ran the batch")
	}
	txmqtest.Halt(a)
	b := x.node(txmq.NodeOptions{})
	listen(x, rec, q, b, func(_ context.Context, msgs []Msg) error { ok.Record(msgs...); return nil })
	waitDelivered(x, ok, keys)
	x.idle(b)
	if r := rec.Runs(); r != 2 {
		x.T.Fatalf("the batch ran %d times; want 2 (on the crashed node, then on the other)", r)
	}
}

// longListenerKeepsLease: a listener that runs three leases long is not redelivered while its
// node lives (the node extends the lease), and no extension is refused. The lease is the
// suite's, or longer on a loaded machine (keptLease).
func longListenerKeepsLease(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{})
	rec := newRecorder()
	lease := x.keptLease(x.Caps.Lease)
	a, b := x.node(txmq.NodeOptions{Lease: lease}), x.node(txmq.NodeOptions{Lease: lease})
	long := sleepy(3 * lease)
	listen(x, rec, q, a, long)
	listen(x, rec, q, b, long)
	keys := publishKeys(x, q, a, "long", 1, 1)
	waitDelivered(x, rec, keys)
	x.idle(a, b)
	if r := rec.Runs(); r != 1 {
		x.T.Fatalf("a listener running 3 leases long ran %d times; want 1 (its lease should have been extended)", r)
	}
	if l := a.Stats().LeaseLost + b.Stats().LeaseLost; l != 0 {
		x.T.Fatalf("nodes report %d lost leases", l)
	}
	if s := a.Stats().Succeeded + b.Stats().Succeeded; s != 1 {
		x.T.Fatalf("nodes report %d successful runs; want 1", s)
	}
}

// lostLeaseSettleErrors: a claim whose lease expired and whose batch another client claimed
// again can no longer be settled or extended: ErrLeaseLost. The new claim counts the
// delivery and settles fine. And the other client never has the batch before the first
// claim's LeaseUntil: until then its holder may still run and settle it (a server whose
// lease clock ran early made an Exclusive queue's batch run twice at once on SQS once).
func lostLeaseSettleErrors(x *X) {
	ctx := x.ctx()
	b1, b2 := x.rawClient(), x.rawClient()
	qn := x.queueName()
	batch := rawBatch(qn, false, "lease")
	if err := b1.Publish(ctx, batch); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	c1 := fetchOne(x, b1, qn, x.Caps.Lease)
	if c1.Deliveries != 1 {
		x.T.Errorf("first claim has Deliveries %d; want 1", c1.Deliveries)
	}
	if !c1.LeaseUntil.After(time.Now()) {
		x.T.Errorf("claim LeaseUntil %v is not in the future", c1.LeaseUntil)
	}
	// Only after c1's lease ran out. Three leases keep c2 safe through the checks below without
	// making a backend whose lease is one shared setting (JetStream's AckWait) wait long.
	c2 := fetchOne(x, b2, qn, x.Caps.Lease*3)
	if at := time.Now(); at.Before(c1.LeaseUntil) {
		x.T.Fatalf("another client claimed the batch %v before the first claim's LeaseUntil", c1.LeaseUntil.Sub(at))
	}
	if c2.Deliveries < 2 {
		x.T.Errorf("second claim after an expired lease has Deliveries %d; want 2", c2.Deliveries)
	}
	if string(c2.Body) != string(batch.Body) {
		x.T.Errorf("the body changed between claims")
	}
	if err := b1.Ack(ctx, c1); !errors.Is(err, core.ErrLeaseLost) {
		x.T.Fatalf("Ack of a lost claim: %v; want an error wrapping core.ErrLeaseLost", err)
	}
	if err := b1.Extend(ctx, c1, x.Caps.Lease); !errors.Is(err, core.ErrLeaseLost) {
		x.T.Fatalf("Extend of a lost claim: %v; want an error wrapping core.ErrLeaseLost", err)
	}
	if err := b1.Retry(ctx, c1, c1.Body, 0); !errors.Is(err, core.ErrLeaseLost) {
		x.T.Fatalf("Retry of a lost claim: %v; want an error wrapping core.ErrLeaseLost", err)
	}
	if err := b2.Extend(ctx, c2, x.Caps.Lease*3); err != nil {
		x.T.Fatalf("Extend of the current claim: %v", err)
	}
	if err := b2.Ack(ctx, c2); err != nil {
		x.T.Fatalf("Ack of the current claim: %v", err)
	}
	x.eventually(func() bool { return depths(x, b2, qn) == core.Depth{} }, "the acked batch gone from the depths")
}

// ackTwiceNoop: settling an already settled claim again is a no-op, and the batch is gone.
func ackTwiceNoop(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	qn := x.queueName()
	if err := b.Publish(ctx, rawBatch(qn, false, "twice")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	c := fetchOne(x, b, qn, x.Caps.Lease*10)
	if err := b.Ack(ctx, c); err != nil {
		x.T.Fatalf("Ack: %v", err)
	}
	if err := b.Ack(ctx, c); err != nil {
		x.T.Fatalf("second Ack: %v; want nil (a no-op)", err)
	}
	if err := b.Drop(ctx, c, core.ReasonDeliveryExhausted); err != nil {
		x.T.Fatalf("Drop after Ack: %v; want nil (a no-op)", err)
	}
	x.eventually(func() bool { return depths(x, b, qn) == core.Depth{} }, "the acked batch gone from the depths")
	cs, err := b.Fetch(ctx, core.FetchRequest{Node: "parity-twice", Lease: x.Caps.Lease, Wait: 2 * x.Caps.Lease, Max: 1,
		Queues: []core.QueueSlots{{Queue: qn, Free: 1}}})
	if err != nil {
		x.T.Fatalf("Fetch: %v", err)
	}
	if len(cs) > 0 {
		x.T.Fatalf("an acked batch was handed out again")
	}
}
