package parity

import (
	"context"
	"errors"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("outages",
		property{name: "publish_unavailable_error", run: publishUnavailable},
		property{name: "nodes_recover_after_restore", dup: true, run: nodesRecover},
	)
}

// publishUnavailable: while the backend is broken, Publish and Fetch fail with errors that
// wrap core.ErrBackendUnavailable; after Restore the same client works again.
func publishUnavailable(x *X) {
	b := x.rawClient()
	qn := x.queueName()
	x.Env.Break(x.T)
	restored := false
	defer func() {
		if !restored {
			x.Env.Restore(x.T)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
	defer cancel()
	err := b.Publish(ctx, rawBatch(qn, false, "lost"))
	if !errors.Is(err, core.ErrBackendUnavailable) {
		x.T.Fatalf("Publish to a broken backend: %v; want an error wrapping core.ErrBackendUnavailable", err)
	}
	_, err = b.Fetch(ctx, core.FetchRequest{Node: "parity-outage", Lease: x.Caps.Lease, Max: 1, Queues: []core.QueueSlots{{Queue: qn, Free: 1}}})
	if !errors.Is(err, core.ErrBackendUnavailable) {
		x.T.Fatalf("Fetch from a broken backend: %v; want an error wrapping core.ErrBackendUnavailable", err)
	}
	x.Env.Restore(x.T)
	restored = true
	x.eventually(func() bool {
		return b.Publish(ctx, rawBatch(qn, false, "after")) == nil
	}, "Publish works again after Restore")
}

// nodesRecover: nodes ride out an outage: a batch whose settle failed during it runs again
// after Restore, and what is published after Restore is delivered.
func nodesRecover(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 4})
	rec, ok := newRecorder(), newRecorder()
	release := make(chan struct{})
	started := make(chan struct{}, 64)
	fn := func(ctx context.Context, msgs []Msg) error {
		if msgs[0].K == "held-0" {
			select {
			case started <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ok.Record(msgs...)
		return nil
	}
	a, b := x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})
	listen(x, rec, q, a, fn)
	listen(x, rec, q, b, fn)
	before := publishKeys(x, q, a, "before", 20, 4)
	waitDelivered(x, ok, before)
	held1 := publishKeys(x, q, a, "held", 1, 1)
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("the held batch never started")
	}
	x.Env.Break(x.T)
	time.Sleep(x.Caps.Lease / 2)
	close(release) // its settle now meets the outage
	time.Sleep(x.Caps.Lease)
	x.Env.Restore(x.T)
	after := publishKeys(x, q, b, "after", 20, 4)
	waitDelivered(x, ok, append(after, held1...))
	x.idle(a, b)
	all := append(append(before, held1...), after...)
	assertSame(x, ok, all)
	if n := rec.Count("held-0"); n < 2 {
		x.T.Fatalf("the batch whose settle met the outage ran %d time(s); want it to run again after Restore", n)
	}
}
