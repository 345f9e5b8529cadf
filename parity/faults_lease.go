package parity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

func init() {
	register("faults",
		property{name: "exclusive_holds_while_extend_fails", run: func(x *X) { exclusiveUnderLeaseFault(x, "fail") }},
		property{name: "exclusive_holds_while_extend_hangs", run: func(x *X) { exclusiveUnderLeaseFault(x, "hang") }},
		property{name: "exclusive_holds_across_node_pause", run: func(x *X) { exclusiveUnderLeaseFault(x, "pause") }},
	)
}

// exclusiveUnderLeaseFault: node A runs a batch of an Exclusive queue while it cannot keep its
// lease: its Extend calls fail with ErrBackendUnavailable ("fail"), hang until their context
// ends ("hang"), or the node is frozen, its driver and lease loop stopped, for two leases and
// then resumed ("pause"). A must fence itself: its listener is cancelled with ErrLeaseLost
// before the lease can end, so when node B claims the batch after the lease expired the two
// never run at once. The cluster-wide peak of running batches (counted outside the nodes) is 1,
// and every message is delivered.
//
// Both nodes take one lease, the suite's or longer on a loaded machine (keptLease): B's runs
// outlast a lease too, so B must keep its lease by extending it, and a lease shorter than a few
// of the machine's latencies would fence B as well and run the batch again and again. The two
// nodes share it because on some backends (NATS) a queue's lease is one setting of the queue,
// not of a node.
func exclusiveUnderLeaseFault(x *X, fault string) {
	q := declare(x, txmq.QueueConfig[Msg]{Exclusive: true, MaxBatchMessages: 1, MaxAttempts: 20})
	rec, ok := newRecorder(), newRecorder()
	lease := x.keptLease(x.Caps.Lease)
	work := lease * 3 / 2 // longer than a lease: without a fence, A would still run when B claims
	started := make(chan struct{}, 64)
	var causes []error
	causeCh := make(chan error, 64)
	fn := func(onA bool) func(ctx context.Context, msgs []Msg) error {
		return func(ctx context.Context, msgs []Msg) error {
			if onA {
				select {
				case started <- struct{}{}:
				default:
				}
			}
			select {
			case <-time.After(work):
			case <-ctx.Done():
				if onA {
					causeCh <- context.Cause(ctx)
				}
				return context.Cause(ctx)
			}
			ok.Record(msgs...)
			return nil
		}
	}
	a, f := x.faultyNode(txmq.NodeOptions{Lease: lease})
	switch fault {
	case "fail":
		f.extendFails.Store(true)
	case "hang":
		f.extendHangs.Store(true)
	}
	listen(x, rec, q, a, fn(true))
	keys := publishKeys(x, q, a, "fence", 2, 1)
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("node A never ran a batch")
	}
	if fault == "pause" {
		txmqtest.Freeze(a)
		time.AfterFunc(2*lease, func() { txmqtest.Thaw(a) })
	}
	b := x.node(txmq.NodeOptions{Lease: lease})
	listen(x, rec, q, b, fn(false))
	// Progress is a run anywhere or a lease A lost: A, still listening, may claim the batch
	// again after each of its leases (and fence itself again), so with a lease grown on a
	// loaded machine several leases may pass before B wins a claim.
	x.progressing(func() bool { return ok.HasAll(keys) }, func() any {
		return [3]int64{int64(rec.Runs()), a.Stats().LeaseLost, b.Stats().Runs}
	}, func() string {
		missing, _ := ok.Diff(keys)
		return fmt.Sprintf("every message delivered: %d of %d missing (first: %s); %s; node A lost %d leases", len(missing), len(keys), first(missing), ok.Summary(), a.Stats().LeaseLost)
	})
	x.idle(a, b)
	for len(causeCh) > 0 {
		causes = append(causes, <-causeCh)
	}
	if p := rec.Peak(q.Name()); p != 1 {
		x.T.Fatalf("peak %d batches of an Exclusive queue running at once (fault %q on node A); want 1: A must stop its listener before its lease can end", p, fault)
	}
	if a.Stats().LeaseLost == 0 || len(causes) == 0 {
		x.T.Fatalf("node A reports %d lost leases and its listener saw %d cancellations; want A to fence itself", a.Stats().LeaseLost, len(causes))
	}
	for _, c := range causes {
		if !errors.Is(c, core.ErrLeaseLost) {
			x.T.Fatalf("node A's listener was cancelled with %v; want core.ErrLeaseLost", c)
		}
	}
	if fault != "pause" && f.extends.Load() == 0 {
		x.T.Fatalf("node A never tried to extend its lease")
	}
	assertSame(x, ok, keys)
}
