package parity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// The group "priority" checks priorities (txmq.QueueConfig.Prioritized, core.Prioritizer):
// higher first among ready batches, the aging bound that keeps a low priority from starving
// under a flood of high ones, the priority kept through the outbox and through retries, and
// per-key order before priority, and batches stored before a queue's Prioritized setting
// changed claimed after it (queue_switch). On an adapter without the capability only "declare" runs
// for real (it asserts the refusal); every other property is counted as "not supported by the
// adapter", never as passed.

func init() {
	register("priority",
		property{name: "declare", run: priorityDeclare},
		property{name: "higher_first", run: priorityHigherFirst},
		property{name: "starvation_bound", run: priorityStarvation},
		property{name: "through_outbox", run: priorityThroughOutbox},
		property{name: "retry_keeps_priority", run: priorityRetry},
		property{name: "key_order_before_priority", run: priorityKeyOrder},
		property{name: "queue_switch", run: priorityQueueSwitch},
	)
}

// prioritizes reports whether the adapter honours priorities (nil), asking a raw client.
func (x *X) prioritizes() error { return core.Prioritizes(x.rawClient()) }

// needPriority ends a property on an adapter without priorities, counted as not supported.
func (x *X) needPriority() {
	x.T.Helper()
	if err := x.prioritizes(); err != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
	}
}

// prioritized declares a Prioritized Exclusive queue with one message per batch, so that its
// batches run one at a time, in the order the backend hands them out.
func prioritized(x *X, cfg txmq.QueueConfig[Msg]) *txmq.Queue[Msg] {
	cfg.Prioritized, cfg.Exclusive, cfg.MaxBatchMessages = true, true, 1
	return declare(x, cfg)
}

// prioLog records the messages a listener ran, in run order.
type prioLog struct {
	mu  sync.Mutex
	ran []string
}

func (l *prioLog) add(k string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ran = append(l.ran, k)
	return len(l.ran)
}

func (l *prioLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ran...)
}

// listenLog listens to q on n, logging each message's K before fn (nil: succeed). The
// properties give n a long lease (steadyLease): a run whose lease a loaded machine lost would
// run again and show twice in the run order.
func listenLog(x *X, q *txmq.Queue[Msg], n *txmq.Node, l *prioLog, fn func(ctx context.Context, m Msg) error) {
	x.T.Helper()
	if err := q.Listen(n, func(ctx context.Context, msgs []Msg) error {
		for _, m := range msgs {
			l.add(m.K)
			if fn != nil {
				if err := fn(ctx, m); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
}

// waitReady waits until the backend holds want ready batches of q.
func waitReady(x *X, q *txmq.Queue[Msg], want int64) {
	x.T.Helper()
	waitDepth(x, q, func(d core.Depth) bool { return d.Ready >= want })
}

// waitDepth waits until q's depth satisfies ok. Storing a large backlog is bound by
// throughput, so the wait lasts while the depth keeps changing (x.progressing).
func waitDepth(x *X, q *txmq.Queue[Msg], ok func(core.Depth) bool) {
	x.T.Helper()
	raw := x.rawClient()
	var last core.Depth
	var lastErr error
	x.progressing(func() bool {
		d, err := raw.Depths(context.Background(), []string{q.Name()})
		last, lastErr = d[q.Name()], err
		return err == nil && ok(last)
	}, func() any { return last.Counts() }, func() string {
		return fmt.Sprintf("the published batches to be stored: depth %+v, error %v", last, lastErr)
	})
}

// priorityDeclare: on an adapter without priorities, a Prioritized queue is refused with an
// error naming the queue and saying the adapter does not honour them, by NewNode (declared
// before) and by Listen and Publish (declared after the node). On one with them, a priority on
// a queue that is not Prioritized, and one out of range, are errors naming the queue.
func priorityDeclare(x *X) {
	refused := func(err error, queue, call string) {
		x.T.Helper()
		if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "does not") {
			x.T.Fatalf("%s with Prioritized queue %q on adapter %s: %v; want ErrInvalidConfig naming the queue and saying the adapter does not honour priorities", call, queue, x.h.Name(), err)
		}
	}
	if perr := x.prioritizes(); perr != nil {
		q := declare(x, txmq.QueueConfig[Msg]{Prioritized: true})
		c, _ := x.client()
		_, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger})
		refused(err, q.Name(), "NewNode")
		reg := txmq.NewRegistry()
		n := x.nodeOnRegistry(reg)
		q2, derr := txmq.DeclareIn(reg, x.queueName(), txmq.QueueConfig[Msg]{Transactional: txmq.Try, Prioritized: true})
		if derr != nil {
			x.T.Fatalf("DeclareIn: %v", derr)
		}
		refused(q2.Listen(n, func(context.Context, []Msg) error { return nil }), q2.Name(), "Listen")
		refused(q2.Publish(context.Background(), n, Msg{K: "a"}, txmq.Priority(5)), q2.Name(), "Publish")
		return
	}
	q := declare(x, txmq.QueueConfig[Msg]{Prioritized: true})
	plain := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	for _, c := range []struct {
		q    *txmq.Queue[Msg]
		p    int
		what string
	}{{plain, 5, "a priority on a queue that is not Prioritized"}, {q, txmq.MaxPriority + 1, "priority 10"}, {q, -1, "priority -1"}} {
		if err := c.q.Publish(context.Background(), n, Msg{K: "a"}, txmq.Priority(c.p)); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), c.q.Name()) {
			x.T.Fatalf("Publish with %s: %v; want ErrInvalidConfig naming queue %q", c.what, err, c.q.Name())
		}
	}
	if err := q.Publish(context.Background(), n, Msg{K: "a"}, txmq.Priority(txmq.MaxPriority)); err != nil {
		x.T.Fatalf("Publish with a priority: %v", err)
	}
}

// priorityHigherFirst: with a long aging step, a backlog of low-priority batches published
// first and high-priority ones published after runs the high ones first, then the low.
func priorityHigherFirst(x *X) {
	x.needPriority()
	q := prioritized(x, txmq.QueueConfig[Msg]{PriorityAging: time.Hour})
	pub := x.node(txmq.NodeOptions{})
	const per = 6
	for i := range per {
		if err := q.Publish(x.ctx(), pub, Msg{K: fmt.Sprint("low-", i)}); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	for i := range per {
		if err := q.Publish(x.ctx(), pub, Msg{K: fmt.Sprint("mid-", i)}, txmq.Priority(4)); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	for i := range per {
		if err := q.Publish(x.ctx(), pub, Msg{K: fmt.Sprint("high-", i)}, txmq.Priority(txmq.MaxPriority)); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	waitReady(x, q, 3*per)
	var l prioLog
	listenLog(x, q, x.node(x.steadyLease()), &l, nil)
	x.eventually(func() bool { return len(l.snapshot()) >= 3*per }, "every batch to run")
	ran := l.snapshot()
	for i, k := range ran[:3*per] {
		want := []string{"high-", "mid-", "low-"}[i/per]
		if !strings.HasPrefix(k, want) {
			x.T.Fatalf("run order %v: run %d is %s, want a %s batch (higher priority first)", ran, i, k, want)
		}
	}
}

// priorityStarvation: a low-priority batch published before a flood of high-priority ones
// (published faster than the listener runs them, so the backlog only grows) runs within the
// aging bound: no high-priority batch whose publish began more than 9*PriorityAging after the
// low one was stored runs before it. Without aging it would wait for the flood to end.
// The wait for the low one is for progress, not a fixed time: the high batches published
// within the bound may run first, and a loaded machine runs them slowly, so the property waits
// while the listener keeps running batches (Caps.Timeout without a run fails it, and so does
// four times Caps.Timeout in all).
func priorityStarvation(x *X) {
	x.needPriority()
	const aging = 100 * time.Millisecond
	bound := time.Duration(txmq.MaxPriority-txmq.MinPriority) * aging
	q := prioritized(x, txmq.QueueConfig[Msg]{PriorityAging: aging})
	pub := x.node(txmq.NodeOptions{})
	if err := q.Publish(x.ctx(), pub, Msg{K: "low"}); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitReady(x, q, 1)
	stored := time.Now() // the low batch is stored by now (on this machine's clock)

	var lowRan atomic.Bool
	var l prioLog
	// The flood: a high-priority batch every 5 ms until the low one ran, or the wait is over.
	// Each is named by when its publish began, relative to the low one's storing. The
	// listener starts once the first ten are stored, so it never finds the low one alone.
	start := time.Now()
	deadline, runs := start.Add(x.Caps.Timeout), 0
	n := 0
	for !lowRan.Load() && time.Now().Before(deadline) && time.Since(start) < 4*x.Caps.Timeout {
		if r := len(l.snapshot()); r > runs { // progress: the wait goes on
			runs, deadline = r, time.Now().Add(x.Caps.Timeout)
		}
		k := fmt.Sprintf("high-%d-%d", n, time.Since(stored).Microseconds())
		if err := q.Publish(x.ctx(), pub, Msg{K: k}, txmq.Priority(txmq.MaxPriority)); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
		n++
		if n == 10 {
			waitDepth(x, q, func(d core.Depth) bool { return d.Ready >= 11 })
			listenLog(x, q, x.node(x.steadyLease()), &l, func(_ context.Context, m Msg) error {
				if m.K == "low" {
					lowRan.Store(true)
				}
				time.Sleep(20 * time.Millisecond) // slower than the flood: the backlog grows
				return nil
			})
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !lowRan.Load() {
		x.T.Fatalf("the low-priority batch did not run within %v under a flood of %d high-priority batches (aging bound %v; %d runs, the last at most %v ago)", time.Since(start).Round(time.Millisecond), n, bound, runs, x.Caps.Timeout)
	}
	ran := l.snapshot()
	before := 0
	for _, k := range ran {
		if k == "low" {
			break
		}
		before++
		var i, us int64
		if _, err := fmt.Sscanf(k, "high-%d-%d", &i, &us); err != nil {
			x.T.Fatalf("unexpected message %q", k)
		}
		if late := time.Duration(us) * time.Microsecond; late > bound {
			x.T.Fatalf("high-priority batch %s, published %v after the low one was stored, ran before it: beyond the aging bound %v", k, late, bound)
		}
	}
	if before == 0 {
		x.T.Fatalf("the low-priority batch ran first of %d: the flood never overtook it (was it prioritized?)", n)
	}
}

// priorityThroughOutbox: batches published in RunInTx on a Require queue keep their priority:
// a high one committed after a low backlog runs first.
func priorityThroughOutbox(x *X) {
	x.needPriority()
	q := prioritized(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require, PriorityAging: time.Hour})
	pub := x.node(txmq.NodeOptions{})
	s := x.store(x.rawClient(), outbox.Options{})
	const per = 5
	for _, p := range []int{0, 7} {
		if err := runInTx(x.ctx(), s, func(ctx context.Context) error {
			for i := range per {
				if err := q.Publish(ctx, pub, Msg{K: fmt.Sprint("p", p, "-", i)}, txmq.Priority(p)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			x.T.Fatalf("RunInTx: %v", err)
		}
	}
	waitReady(x, q, 2*per)
	var l prioLog
	listenLog(x, q, x.node(x.steadyLease()), &l, nil)
	x.eventually(func() bool { return len(l.snapshot()) >= 2*per }, "every batch to run")
	ran := l.snapshot()
	for i, k := range ran[:2*per] {
		want := []string{"p7-", "p0-"}[i/per]
		if !strings.HasPrefix(k, want) {
			x.T.Fatalf("run order %v: run %d is %s, want a %s batch (the priority kept through the outbox)", ran, i, k, want)
		}
	}
}

// priorityRetry: a high-priority batch that fails once comes back ahead of the low-priority
// backlog published before it: at most two low ones run between its two runs (one taken while
// its short backoff ran, one racing it), and most of the backlog after.
func priorityRetry(x *X) {
	x.needPriority()
	q := prioritized(x, txmq.QueueConfig[Msg]{PriorityAging: time.Hour, Backoff: func(int) time.Duration { return time.Millisecond }})
	pub := x.node(txmq.NodeOptions{})
	const low = 12
	for i := range low {
		if err := q.Publish(x.ctx(), pub, Msg{K: fmt.Sprint("low-", i)}); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	if err := q.Publish(x.ctx(), pub, Msg{K: "high"}, txmq.Priority(txmq.MaxPriority)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitReady(x, q, low+1)
	var l prioLog
	var failed atomic.Bool
	listenLog(x, q, x.node(x.steadyLease()), &l, func(_ context.Context, m Msg) error {
		if m.K == "high" && failed.CompareAndSwap(false, true) {
			return errors.New("first run fails")
		}
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	x.eventually(func() bool { return len(l.snapshot()) >= low+2 }, "every batch to run, the high one twice")
	ran := l.snapshot()
	var runs []int
	for i, k := range ran {
		if k == "high" {
			runs = append(runs, i)
		}
	}
	if len(runs) != 2 || runs[0] != 0 {
		x.T.Fatalf("run order %v: want the high batch first and run twice", ran)
	}
	if between := runs[1] - runs[0] - 1; between > 2 {
		x.T.Fatalf("run order %v: %d low batches ran between the high batch's runs; its retry lost its priority", ran, between)
	}
}

// priorityKeyOrder: on an Ordered, Prioritized queue a key's publish order wins over priority
// (a later high-priority batch of a key waits for the key's earlier low one), while among the
// keys' heads the higher priority runs first.
func priorityKeyOrder(x *X) {
	x.needPriority()
	x.needOrdering()
	q := prioritized(x, txmq.QueueConfig[Msg]{Ordered: true, PriorityAging: time.Hour})
	pub := x.node(txmq.NodeOptions{})
	for _, m := range []struct {
		k, key string
		p      int
	}{{"a1", "a", 0}, {"a2", "a", 9}, {"b1", "b", 5}} {
		if err := q.Publish(x.ctx(), pub, Msg{K: m.k}, txmq.Key(m.key), txmq.Priority(m.p)); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	// The heads a1 and b1 ready, a2 waiting behind a1.
	waitDepth(x, q, func(d core.Depth) bool { return d.Ready >= 2 && d.Delayed >= 1 })
	var l prioLog
	listenLog(x, q, x.node(x.steadyLease()), &l, nil)
	x.eventually(func() bool { return len(l.snapshot()) >= 3 }, "every batch to run")
	if ran := l.snapshot(); strings.Join(ran, ",") != "b1,a1,a2" {
		x.T.Fatalf("run order %v; want b1,a1,a2 (heads by priority, a key in publish order)", ran)
	}
}
