package parity

import (
	"errors"
	"fmt"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("contract",
		property{name: "run_now_delayed_and_ordered", run: runNowDelayed},
	)
}

// runNowDelayed: the operator's "run now" (Inspector.RunNow over core.BatchExpediter) makes
// a batch published an hour ahead due at once: a started node runs it within the suite's
// timeout, once, its message unchanged, and a second RunNow finds nothing left to do. On an
// Ordered queue a batch expedited while the head of its key waits still runs after the head
// (key order kept). An adapter without a native lookup and core.BatchExpediter counts as not
// supported, never as passed, and Inspector.CanRunNow says so with ErrLookupUnsupported.
func runNowDelayed(x *X) {
	raw := x.rawClient()
	in := txmq.NewInspector(nil, raw)
	_, look := raw.(core.BatchInspector)
	_, exp := raw.(core.BatchExpediter)
	if !look || !exp {
		if err := in.CanRunNow(); !errors.Is(err, core.ErrLookupUnsupported) {
			x.T.Fatalf("CanRunNow on a backend without core.BatchExpediter = %v; want an error wrapping core.ErrLookupUnsupported", err)
		}
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: no run now (core.BatchInspector and core.BatchExpediter)", x.h.Name())
	}
	ctx := x.ctx()
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Never})
	n := x.nodeOn(raw, txmq.NodeOptions{})
	rec := newRecorder()
	listen(x, rec, q, n, nil)
	if err := q.Publish(ctx, n, Msg{K: "later"}, txmq.After(time.Hour)); err != nil {
		x.T.Fatalf("Publish After(1h): %v", err)
	}
	var d core.Depth
	x.eventually(func() bool { d = depthOf(x, raw, q); return d.Delayed == 1 },
		func() string { return fmt.Sprintf("the batch stored as delayed: Depths %+v", d) })
	res, err := in.RunNow(ctx, txmq.MessageFilter{Queue: q.Name(), State: core.StateDelayed})
	if err != nil || res.Done != 1 {
		x.T.Fatalf("RunNow of the delayed batch = %+v, %v; want Done 1", res, err)
	}
	x.eventually(func() bool { return rec.Count("later") == 1 }, "the expedited message runs within the suite's timeout")
	x.idle(n)
	if got := rec.Count("later"); got != 1 {
		x.T.Fatalf("the expedited message ran %d times; want once", got)
	}
	if res, err := in.RunNow(ctx, txmq.MessageFilter{Queue: q.Name(), State: core.StateDelayed}); err != nil || res.Done != 0 {
		x.T.Fatalf("a second RunNow = %+v, %v; want nothing done", res, err)
	}
	runNowOrdered(x, raw, in)
}

// runNowOrdered: on an Ordered queue, two batches of one key published an hour ahead (the
// second held behind the first): RunNow makes both due, and they run in key order, one at a
// time.
func runNowOrdered(x *X, raw core.Backend, in *txmq.Inspector) {
	if x.ordersKeys() != nil {
		return
	}
	ctx := x.ctx()
	q := ordered(x, txmq.QueueConfig[Msg]{Transactional: txmq.Never, MaxBatchMessages: 1})
	n := x.nodeOn(raw, txmq.NodeOptions{})
	lg := newRunLog(nil)
	lg.listen(x, q, n)
	for _, k := range []string{"k#0", "k#1"} {
		if err := q.Publish(ctx, n, Msg{K: k}, txmq.Key("k"), txmq.After(time.Hour)); err != nil {
			x.T.Fatalf("Publish %s After(1h) with a key: %v", k, err)
		}
	}
	var d core.Depth
	x.eventually(func() bool { d = depthOf(x, raw, q); return d.Ready+d.Delayed == 2 && d.InFlight == 0 },
		func() string { return fmt.Sprintf("both batches of the key stored: Depths %+v", d) })
	res, err := in.RunNow(ctx, txmq.MessageFilter{Queue: q.Name(), State: core.StateDelayed})
	if err != nil || res.Done != 2 {
		x.T.Fatalf("RunNow of the key's two delayed batches = %+v, %v; want Done 2", res, err)
	}
	want := []string{"k#0", "k#1"}
	lg.wait(x, want)
	x.idle(n)
	lg.check(x, want)
}
