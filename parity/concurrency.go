package parity

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

func init() {
	register("concurrency",
		property{name: "exclusive_peak_one_three_nodes", dup: true, run: exclusiveAcrossThreeNodes},
		property{name: "max_concurrent_batches", dup: true, run: maxConcurrentBatches},
		property{name: "cap_func_changes_at_run_time", run: capFuncChanges},
		property{name: "fetch_within_free_slots", run: fetchWithinFreeSlots},
		property{name: "no_listener_no_batches", run: noListenerNoBatches},
	)
}

func sleepy(d time.Duration) func(context.Context, []Msg) error {
	return func(ctx context.Context, _ []Msg) error {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return nil
	}
}

// exclusiveAcrossThreeNodes: three nodes listen to an Exclusive queue; at most one batch runs
// at any time in the whole cluster, and everything is delivered.
func exclusiveAcrossThreeNodes(x *X) {
	q := declare(x, txmq.QueueConfig[Msg]{Exclusive: true, MaxBatchMessages: 1})
	rec := newRecorder()
	nodes := []*txmq.Node{x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})}
	for _, n := range nodes {
		listen(x, rec, q, n, sleepy(5*time.Millisecond))
	}
	keys := publishKeys(x, q, nodes[0], "x", 24, 24)
	waitDelivered(x, rec, keys)
	x.idle(nodes...)
	assertSame(x, rec, keys)
	if p := rec.Peak(q.Name()); p != 1 {
		x.T.Fatalf("Exclusive queue peaked at %d concurrent batches across the cluster; want exactly 1", p)
	}
	if r := rec.Runs(); r < len(keys)*x.copies() {
		x.T.Fatalf("%d runs for %d single-message batches", r, len(keys)*x.copies())
	}
}

// maxConcurrentBatches: with txmq.Cap(2) no node ever runs more than 2 (+CapOvershoot) batches
// of the queue at once; batches over the cap still run (later), never bounced.
func maxConcurrentBatches(x *X) {
	const limit = 2
	q := declare(x, txmq.QueueConfig[Msg]{MaxConcurrentBatches: txmq.Cap(limit), MaxBatchMessages: 1})
	rec := newRecorder()
	a, b := x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})
	listen(x, rec, q, a, sleepy(20*time.Millisecond))
	listen(x, rec, q, b, sleepy(20*time.Millisecond))
	keys := publishKeys(x, q, a, "c", 40, 40)
	waitDelivered(x, rec, keys)
	x.idle(a, b)
	assertSame(x, rec, keys)
	for _, n := range []*txmq.Node{a, b} {
		if p := rec.NodePeak(q.Name(), n.ID()); p > limit+CapOvershoot {
			x.T.Fatalf("node %s ran %d batches at once; MaxConcurrentBatches is %d (documented overshoot %d)", n.ID(), p, limit, CapOvershoot)
		}
	}
}

// capFuncChanges: a txmq.CapFunc is re-read at every check, so raising and lowering it while
// the node runs takes effect. A lowered cap applies from the node's next Fetch: a Fetch that
// was already waiting, asked with the old cap's free slots, may still fill them (the soft
// throttle's documented slack), so each phase first lets such a Fetch run out.
func capFuncChanges(x *X) {
	var limit atomic.Int64
	limit.Store(1)
	q := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1, MaxConcurrentBatches: txmq.CapFunc(func() (int, error) { return int(limit.Load()), nil })})
	rec := newRecorder()
	n := x.node(txmq.NodeOptions{})
	listen(x, rec, q, n, sleepy(40*time.Millisecond))
	phase := func(name string, cap int64, count int) int {
		limit.Store(cap)
		sleep(2*x.Caps.PollWait + time.Second) // a Fetch asked under the old cap runs out
		rec.ResetPeaks()
		keys := publishKeys(x, q, n, name, count, count)
		waitDelivered(x, rec, keys)
		x.idle(n)
		p := rec.NodePeak(q.Name(), n.ID())
		if p > int(cap)+CapOvershoot {
			x.T.Fatalf("phase %s: cap func returned %d but %d batches ran at once", name, cap, p)
		}
		return p
	}
	phase("one", 1, 10)
	if p := phase("four", 4, 24); p < 2 {
		x.T.Fatalf("cap func raised to 4, yet never more than %d batch ran at once over 24 batches", p)
	}
	phase("back-to-one", 1, 8)
}

// fetchWithinFreeSlots: Fetch never hands out more claims than the free slots asked for, nor
// more than one of an Exclusive queue, nor any of a queue not asked for; checked directly on
// the backend and on every fetch of a busy node (every property's nodes are checked too).
func fetchWithinFreeSlots(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	capped, excl, other := x.queueName(), x.queueName(), x.queueName()
	for _, qn := range []string{capped, excl, other} {
		for i := range 10 {
			if err := b.Publish(ctx, rawBatch(qn, i == 0 && qn == excl, fmt.Sprintf("%s-%d", qn, i))); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
		}
	}
	var got []*core.Claim
	for range 3 { // a backend may return fewer than asked: ask again for the slots left
		req := core.FetchRequest{Node: "parity-direct", Lease: x.Caps.Lease * 10, Wait: x.Caps.PollWait, Max: 100}
		if free := 3 - countOf(got, capped); free > 0 {
			req.Queues = append(req.Queues, core.QueueSlots{Queue: capped, Free: free})
		}
		if countOf(got, excl) == 0 {
			req.Queues = append(req.Queues, core.QueueSlots{Queue: excl, Free: 1, Exclusive: true})
		}
		if len(req.Queues) == 0 {
			break
		}
		cs, err := b.Fetch(ctx, req)
		if err != nil {
			x.T.Fatalf("Fetch: %v", err)
		}
		for _, qs := range req.Queues {
			if n := countOf(cs, qs.Queue); n > qs.Free {
				x.T.Fatalf("Fetch asked for %d of %s and got %d", qs.Free, qs.Queue, n)
			}
		}
		if n := countOf(cs, other); n > 0 {
			x.T.Fatalf("Fetch returned %d claims of %s, a queue it was not asked for", n, other)
		}
		got = append(got, cs...)
	}
	if countOf(got, capped) > 3 || countOf(got, excl) > 1 || countOf(got, other) > 0 {
		x.T.Fatalf("over three fetches: %d of capped (3 free), %d of exclusive, %d of a queue not asked for", countOf(got, capped), countOf(got, excl), countOf(got, other))
	}
	for _, c := range got {
		if err := b.Ack(ctx, c); err != nil {
			x.T.Fatalf("Ack: %v", err)
		}
	}

	// The same through a node with three queues under load.
	qc := declare(x, txmq.QueueConfig[Msg]{MaxConcurrentBatches: txmq.Cap(3), MaxBatchMessages: 1})
	qx := declare(x, txmq.QueueConfig[Msg]{Exclusive: true, MaxBatchMessages: 1})
	qu := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1})
	rec := newRecorder()
	n, chk := x.nodeChecked(txmq.NodeOptions{})
	var keys []string
	for _, q := range []*txmq.Queue[Msg]{qc, qx, qu} {
		listen(x, rec, q, n, sleepy(10*time.Millisecond))
		keys = append(keys, publishKeys(x, q, n, q.Name(), 20, 20)...)
	}
	waitDelivered(x, rec, keys)
	x.idle(n)
	if chk.fetchCount() == 0 {
		x.T.Fatalf("the node never fetched")
	}
	if v := chk.violations(); len(v) > 0 {
		x.T.Fatalf("Fetch handed the node more than it asked for: %v", v)
	}
	if p := rec.NodePeak(qc.Name(), n.ID()); p > 3+CapOvershoot {
		x.T.Fatalf("capped queue ran %d at once; cap 3", p)
	}
	if p := rec.Peak(qx.Name()); p != 1 {
		x.T.Fatalf("exclusive queue ran %d at once", p)
	}
}

func countOf(cs []*core.Claim, queue string) int {
	n := 0
	for _, c := range cs {
		if c.Queue == queue {
			n++
		}
	}
	return n
}

// noListenerNoBatches: node B listens to q1 only and never receives a batch of q2, which node
// A (listening to both) gets entirely.
func noListenerNoBatches(x *X) {
	q1 := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 2})
	q2 := declare(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 2})
	rec1, rec2 := newRecorder(), newRecorder()
	a := x.node(txmq.NodeOptions{})
	b, chk := x.nodeChecked(txmq.NodeOptions{})
	listen(x, rec1, q1, a, nil)
	listen(x, rec2, q2, a, nil)
	listen(x, rec1, q1, b, nil)
	k1 := publishKeys(x, q1, b, "one", 30, 2)
	k2 := publishKeys(x, q2, b, "two", 30, 2)
	waitDelivered(x, rec1, k1)
	waitDelivered(x, rec2, k2)
	x.idle(a, b)
	assertSame(x, rec2, k2)
	if n := chk.claimed(q2.Name()); n > 0 {
		x.T.Fatalf("node B, which has no listener for %s, was handed %d of its batches", q2.Name(), n)
	}
	if p := rec2.NodePeak(q2.Name(), b.ID()); p > 0 {
		x.T.Fatalf("node B ran a batch of %s", q2.Name())
	}
}
