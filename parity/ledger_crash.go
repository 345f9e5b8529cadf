package parity

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest"
)

// The ledger converges after a crash: a message whose node died running it does not read
// "running" past the lease, in lookups and in listings by state (the messages group).

func init() {
	register("messages",
		property{name: "ledger_running_converges_after_crash", run: ledgerCrashConverges},
		property{name: "ledger_long_run_reads_running", run: ledgerLongRun},
	)
}

// crashMargin is how long after its lease a message of a crashed node may still read running:
// the ledger's flush, the clocks of the node and of the database, a lease extension that
// landed just before the crash. On a loaded machine the margin grows with the latency the
// suite measured (crashBound).
const crashMargin = 2 * time.Second

// crashBound is how long after its node crashed a message may read running: the lease plus
// crashMargin, or plus leasePerLatency times the measured latency when that is longer (a
// machine at load 28 read it running past the quiet bound).
func (x *X) crashBound() time.Duration {
	return x.Caps.Lease + max(crashMargin, leasePerLatency*x.latency())
}

// ledgerCrashConverges: node A dies (Halt) while it runs a batch, which the ledger shows
// running on A. Within about one lease (the lease plus crashMargin), the message reads queued
// or waiting to retry, in Get and in the listings by state (no longer among the running ones);
// once node B runs it, it reads completed on B.
func ledgerCrashConverges(x *X) {
	lg := x.ledger()
	q := declare(x, txmq.QueueConfig[Msg]{})
	in := txmq.NewInspector(lg, x.rawClient())
	started := make(chan struct{}, 4)
	a := x.node(txmq.NodeOptions{Ledger: lg})
	listen(x, newRecorder(), q, a, func(ctx context.Context, _ []Msg) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	id := "crash/" + q.Name()
	if err := q.Publish(context.Background(), a, Msg{K: "crash"}, txmq.ID(id)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("node A never ran the batch")
	}
	m := waitState(x, in, id, core.StateRunning)
	if m.Node != a.ID() {
		x.T.Fatalf("running message: %+v; want node %s", m, a.ID())
	}
	halted := time.Now()
	txmqtest.Halt(a)

	listed := func(state core.MessageState) bool {
		ms, err := in.List(context.Background(), core.MessageFilter{Queue: q.Name(), State: state})
		if err != nil {
			x.T.Fatalf("List(%s): %v", state, err)
		}
		return slices.ContainsFunc(ms, func(m core.MessageInfo) bool { return m.ID == id })
	}
	var lastErr error
	x.eventually(func() bool {
		m, lastErr = in.Get(context.Background(), id)
		return lastErr == nil && (m.State == core.StateQueued || m.State == core.StateRetry)
	}, func() string {
		return fmt.Sprintf("message %q of the crashed node reads queued or retry (last seen %v after the crash: %+v, error %v)", id, time.Since(halted).Round(time.Millisecond), m, lastErr)
	})
	took, bound := time.Since(halted), x.crashBound()
	x.T.Logf("the message read %s %v after its node crashed (lease %v)", m.State, took.Round(time.Millisecond), x.Caps.Lease)
	if took > bound {
		x.T.Errorf("the message read running %v after its node crashed; want at most the lease plus %v or %d times the measured latency (%v)", took, crashMargin, leasePerLatency, bound)
	}
	if listed(core.StateRunning) {
		x.T.Errorf("List(state running) still lists %s after its node crashed and its lease ended", id)
	}
	if !listed(m.State) {
		x.T.Errorf("List(state %s) does not list %s, which Get reports %s", m.State, id, m.State)
	}

	b := x.node(txmq.NodeOptions{Ledger: lg})
	ok := newRecorder()
	listen(x, ok, q, b, nil)
	waitDelivered(x, ok, []string{"crash"})
	m = waitState(x, in, id, core.StateCompleted)
	if m.Node != b.ID() {
		x.T.Errorf("completed message: %+v; want node %s", m, b.ID())
	}
}

// ledgerLongRun: a listener that runs three leases long, its node alive and extending the
// lease, reads running all along (the extensions move the lease's end the ledger knows), then
// completed. The node must keep its lease: it takes one of at least 2 s, longer on a loaded
// machine (keptLease).
func ledgerLongRun(x *X) {
	lg := x.ledger()
	q := declare(x, txmq.QueueConfig[Msg]{})
	lease := x.keptLease(max(x.Caps.Lease, 2*time.Second))
	n := x.node(txmq.NodeOptions{Ledger: lg, Lease: lease})
	in := n.Inspector()
	rec := newRecorder()
	g := newGate()
	listen(x, rec, q, n, g.listen)
	id := "long/" + q.Name()
	if err := q.Publish(context.Background(), n, Msg{K: "long"}, txmq.ID(id)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	select {
	case <-g.started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("the batch never ran")
	}
	waitState(x, in, id, core.StateRunning)
	for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(lease / 4) {
		m, err := in.Get(context.Background(), id)
		if err != nil || m.State != core.StateRunning || m.Node != n.ID() {
			x.T.Fatalf("Get while the listener runs (its node extending the lease) = %+v, %v; want running on %s", m, err, n.ID())
		}
	}
	g.verdict <- nil
	waitState(x, in, id, core.StateCompleted)
	if l := n.Stats().LeaseLost; l != 0 {
		x.T.Fatalf("the node reports %d lost leases", l)
	}
}
