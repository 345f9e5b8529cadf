package parity

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
)

// The group "limits" checks cluster-wide concurrency limits (txmq.QueueConfig.ClusterLimit and
// KeyLimit, core.ClusterLimiter): an external counter of the batches running at once, across
// several nodes, is never above the limit (globally, and per fairness key), and reaches it (a
// limit that is too tight fails too: each run holds until the limit is reached, or
// Caps.Timeout); slots come back on settle (every batch runs, some after a failed run) and on
// lease expiry (a node that cannot extend, is paused or crashes gives its slots back after its
// lease); the limit holds through the outbox and on an ordered queue; a limit of 1 behaves as
// Exclusive. On an adapter without the capability only "declare" runs for real (it asserts
// the refusal); every other property is counted as "not supported by the adapter", never as
// passed.

func init() {
	register("limits",
		property{name: "declare", run: limitsDeclare},
		property{name: "global_peak_three_nodes", dup: true, run: limitsGlobal},
		property{name: "per_key_peak_three_nodes", dup: true, run: limitsPerKey},
		property{name: "per_key_peak_with_priorities", dup: true, run: limitsPerKeyPrioritized},
		property{name: "limit_one_is_exclusive", dup: true, run: limitsOne},
		property{name: "released_while_extend_fails", run: func(x *X) { limitsLeaseFault(x, "fail") }},
		property{name: "released_across_node_pause", run: func(x *X) { limitsLeaseFault(x, "pause") }},
		property{name: "released_after_node_crash", run: func(x *X) { limitsLeaseFault(x, "crash") }},
		property{name: "through_outbox", run: limitsThroughOutbox},
		property{name: "with_ordering_keys", run: limitsOrdered},
	)
}

// LimitsClaims lets a faulty client keep its backend's capability.
func (f *faulty) LimitsClaims() error { return core.LimitsClaims(f.Backend) }

// needLimits ends a property on an adapter without cluster-wide limits, counted as not
// supported.
func (x *X) needLimits() {
	x.T.Helper()
	if err := core.LimitsClaims(x.rawClient()); err != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
	}
}

// limitCounter counts runs at once, in all and per key, outside the nodes.
type limitCounter struct {
	mu             sync.Mutex
	all, allPeak   int
	keys, keyPeaks map[string]int
	reach          int           // the count of runs at once that closes reached
	reached        chan struct{} // closed once reach runs ran at once
}

func newLimitCounter(reach int) *limitCounter {
	return &limitCounter{keys: map[string]int{}, keyPeaks: map[string]int{}, reach: reach, reached: make(chan struct{})}
}

// enter counts a run of key and returns the func that ends it.
func (c *limitCounter) enter(key string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all++
	c.keys[key]++
	c.allPeak = max(c.allPeak, c.all)
	c.keyPeaks[key] = max(c.keyPeaks[key], c.keys[key])
	if c.all == c.reach {
		select {
		case <-c.reached:
		default:
			close(c.reached)
		}
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.all--
		c.keys[key]--
	}
}

// peaks returns the peak of runs at once, and the highest peak of one key with its key.
func (c *limitCounter) peaks() (all, key int, which string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.keyPeaks {
		if p > key {
			key, which = p, k
		}
	}
	return c.allPeak, key, which
}

// listener returns a listener of single-message batches that counts its runs by the key
// keyOf gives, holds each run until reach runs ran at once (or limit, or its ctx ends), then
// works a moment; fail, when set, fails a run that returns true.
func (c *limitCounter) listener(x *X, keyOf func(Msg) string, fail func(Msg) bool) func(context.Context, []Msg) error {
	return func(ctx context.Context, msgs []Msg) error {
		leave := c.enter(keyOf(msgs[0]))
		defer leave()
		select {
		case <-c.reached:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(x.Caps.Timeout / 2):
		}
		sleep(5 * time.Millisecond) // hold the slot while the other nodes fetch
		if fail != nil && fail(msgs[0]) {
			return errors.New("parity: failing this run once")
		}
		return nil
	}
}

// check fails the property when the peaks are over the limits or the reach was not reached.
func (c *limitCounter) check(x *X, global, perKey int) {
	x.T.Helper()
	all, key, which := c.peaks()
	if global > 0 && all > global {
		x.T.Fatalf("%d batches ran at once across the cluster; ClusterLimit is %d", all, global)
	}
	if perKey > 0 && key > perKey {
		x.T.Fatalf("%d batches of key %q ran at once across the cluster; KeyLimit is %d", key, which, perKey)
	}
	if all < c.reach {
		x.T.Fatalf("at most %d batches ran at once; want %d to run at once (a limit must not be tighter than declared)", all, c.reach)
	}
}

// failOnce returns a func that is true the first time it sees each message whose index (the
// number after the last '-' of its K) is a multiple of every.
func failOnce(every int) func(Msg) bool {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(m Msg) bool {
		i, err := strconv.Atoi(m.K[strings.LastIndexByte(m.K, '-')+1:])
		if err != nil || i%every != 0 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[m.K] {
			return false
		}
		seen[m.K] = true
		return true
	}
}

// threeNodes starts three nodes listening to q with fn, recorded by rec.
func threeNodes(x *X, rec *txmqtest.Recorder[Msg], q *txmq.Queue[Msg], fn func(context.Context, []Msg) error) []*txmq.Node {
	nodes := []*txmq.Node{x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})}
	for _, n := range nodes {
		listen(x, rec, q, n, fn)
	}
	return nodes
}

// limitsDeclare: on an adapter without the capability, a queue with a ClusterLimit or a
// KeyLimit is refused by NewNode (declared before) and by Listen and Publish (declared after
// the node), with an error naming the queue and the setting. On every adapter the settings'
// conflicts are declaration errors naming the queue.
func limitsDeclare(x *X) {
	for _, c := range []struct {
		cfg  txmq.QueueConfig[Msg]
		what string
	}{
		{txmq.QueueConfig[Msg]{Transactional: txmq.Try, ClusterLimit: -1}, "ClusterLimit"},
		{txmq.QueueConfig[Msg]{Transactional: txmq.Try, KeyLimit: -1, Fair: true}, "KeyLimit"},
		{txmq.QueueConfig[Msg]{Transactional: txmq.Try, ClusterLimit: 2, Exclusive: true}, "Exclusive and ClusterLimit"},
		{txmq.QueueConfig[Msg]{Transactional: txmq.Try, KeyLimit: 2, Exclusive: true, Fair: true}, "Exclusive and KeyLimit"},
		{txmq.QueueConfig[Msg]{Transactional: txmq.Try, KeyLimit: 2}, "needs Fair"},
	} {
		name := x.queueName()
		_, err := txmq.DeclareIn(txmq.NewRegistry(), name, c.cfg)
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), c.what) {
			x.T.Fatalf("declaring %+v: %v; want ErrInvalidConfig naming queue %q and %q", c.cfg, err, name, c.what)
		}
	}
	lerr := core.LimitsClaims(x.rawClient())
	if lerr == nil {
		q := declare(x, txmq.QueueConfig[Msg]{ClusterLimit: 2})
		n := x.node(txmq.NodeOptions{})
		if err := q.Publish(x.ctx(), n, Msg{K: "a"}); err != nil {
			x.T.Fatalf("Publish on a queue with a ClusterLimit: %v", err)
		}
		return
	}
	refused := func(err error, queue, setting, call string) {
		x.T.Helper()
		if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), setting) {
			x.T.Fatalf("%s with queue %q setting %s on adapter %s: %v; want ErrInvalidConfig naming the queue and the setting", call, queue, setting, x.h.Name(), err)
		}
	}
	q := declare(x, txmq.QueueConfig[Msg]{ClusterLimit: 3})
	c, _ := x.client()
	_, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger})
	refused(err, q.Name(), "ClusterLimit", "NewNode")
	reg := txmq.NewRegistry()
	n := x.nodeOnRegistry(reg)
	q2, derr := txmq.DeclareIn(reg, x.queueName(), txmq.QueueConfig[Msg]{Transactional: txmq.Try, Fair: true, KeyLimit: 1})
	if derr != nil {
		x.T.Fatalf("DeclareIn: %v", derr)
	}
	if ferr := x.sharesFairly(); ferr == nil {
		refused(q2.Listen(n, func(context.Context, []Msg) error { return nil }), q2.Name(), "KeyLimit", "Listen")
		refused(q2.Publish(context.Background(), n, Msg{K: "a"}), q2.Name(), "KeyLimit", "Publish")
	} else if err := q2.Listen(n, func(context.Context, []Msg) error { return nil }); err == nil {
		x.T.Fatalf("Listen on a Fair queue with a KeyLimit on adapter %s succeeded; want it refused", x.h.Name())
	}
	x.unsupported.Store(true) // the refusal is what the adapter owes: counted as not supported
}

// limitsGlobal: three nodes listen to a queue with ClusterLimit 2; every fourth batch fails its
// first run (Retry gives the slot back), the others are acked. At most 2 run at once across the
// cluster, 2 do run at once, and every message is delivered.
func limitsGlobal(x *X) {
	x.needLimits()
	const n = 2
	q := declare(x, txmq.QueueConfig[Msg]{ClusterLimit: n, MaxBatchMessages: 1, MaxAttempts: 10})
	ctr := newLimitCounter(n)
	rec := newRecorder()
	nodes := threeNodes(x, rec, q, ctr.listener(x, func(Msg) string { return "" }, failOnce(4)))
	keys := publishKeys(x, q, nodes[0], "g", 24, 24)
	waitDelivered(x, rec, keys)
	x.idle(nodes...)
	assertSame(x, rec, keys)
	ctr.check(x, n, 0)
}

// limitsPerKey: three nodes listen to a Fair queue whose batches have three fairness keys,
// first with KeyLimit 1 alone, then with KeyLimit 2 and ClusterLimit 3: no key ever has more
// than its limit running at once, the queue no more than its ClusterLimit, and keys run
// beside each other up to the global limit (2, then 3).
func limitsPerKey(x *X) {
	x.needLimits()
	x.needFair()
	for _, c := range []struct{ keyLimit, clusterLimit, reach int }{{1, 0, 2}, {2, 3, 3}} {
		q := declare(x, txmq.QueueConfig[Msg]{Fair: true, KeyLimit: c.keyLimit, ClusterLimit: c.clusterLimit, MaxBatchMessages: 1, MaxAttempts: 10})
		ctr := newLimitCounter(c.reach)
		rec := newRecorder()
		nodes := threeNodes(x, rec, q, ctr.listener(x, func(m Msg) string { return m.P }, failOnce(5)))
		var keys []string
		for _, tenant := range []string{"t1", "t2", "t3"} {
			msgs := make([]Msg, 8)
			for i := range msgs {
				msgs[i] = Msg{K: fmt.Sprintf("%s-%d", tenant, i), P: tenant}
				keys = append(keys, msgs[i].K)
			}
			if err := q.PublishMany(x.ctx(), nodes[0], msgs, txmq.FairKey(tenant)); err != nil {
				x.T.Fatalf("PublishMany: %v", err)
			}
		}
		waitDelivered(x, rec, keys)
		x.idle(nodes...)
		assertSame(x, rec, keys)
		ctr.check(x, c.clusterLimit, c.keyLimit)
	}
}

// limitsPerKeyPrioritized: KeyLimit on a queue both Fair and Prioritized (each key's turn takes
// its best batch by priority): three nodes, batches of three keys at mixed priorities, one
// failing once every fifth; at most KeyLimit (1) of a key run at once, two keys do run at
// once, and every batch runs. Adapters that cannot rank a fair queue by priority refuse the
// queue (fairness/with_priorities asserts it) and count this as not supported.
func limitsPerKeyPrioritized(x *X) {
	x.needLimits()
	x.needFair()
	x.needPriority()
	if err := core.SharesFairlyByPriority(x.rawClient()); err != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
	}
	q := declare(x, txmq.QueueConfig[Msg]{Fair: true, Prioritized: true, KeyLimit: 1, MaxBatchMessages: 1, MaxAttempts: 10})
	ctr := newLimitCounter(2)
	rec := newRecorder()
	nodes := threeNodes(x, rec, q, ctr.listener(x, func(m Msg) string { return m.P }, failOnce(5)))
	var keys []string
	for _, tenant := range []string{"t1", "t2", "t3"} {
		for i := range 8 {
			m := Msg{K: fmt.Sprintf("%s-%d", tenant, i), P: tenant}
			keys = append(keys, m.K)
			if err := q.Publish(x.ctx(), nodes[i%3], m, txmq.FairKey(tenant), txmq.Priority(i%10)); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
		}
	}
	waitDelivered(x, rec, keys)
	x.idle(nodes...)
	assertSame(x, rec, keys)
	ctr.check(x, 0, 1)
}

// limitsOne: ClusterLimit 1 means what Exclusive means: three nodes, peak exactly 1.
func limitsOne(x *X) {
	x.needLimits()
	q := declare(x, txmq.QueueConfig[Msg]{ClusterLimit: 1, MaxBatchMessages: 1})
	rec := newRecorder()
	nodes := threeNodes(x, rec, q, sleepy(5*time.Millisecond))
	keys := publishKeys(x, q, nodes[0], "one", 24, 24)
	waitDelivered(x, rec, keys)
	x.idle(nodes...)
	assertSame(x, rec, keys)
	if p := rec.Peak(q.Name()); p != 1 {
		x.T.Fatalf("a queue with ClusterLimit 1 peaked at %d batches at once across the cluster; want exactly 1, as Exclusive", p)
	}
}

// limitsLeaseFault: node A takes both slots of a queue with ClusterLimit 2 with runs longer
// than a lease, then cannot keep them: its Extend calls fail ("fail"), it is frozen for two
// leases ("pause"), or it crashes (txmqtest.Halt, "crash"). Node B gets the slots after A's
// leases end: every message is delivered (B runs them), and the runs counted outside the nodes
// never exceed 2 at once, A fencing itself before its leases end.
func limitsLeaseFault(x *X, fault string) {
	x.needLimits()
	const n = 2
	q := declare(x, txmq.QueueConfig[Msg]{ClusterLimit: n, MaxBatchMessages: 1, MaxAttempts: 20})
	rec, ok := newRecorder(), newRecorder()
	work := x.Caps.Lease * 3 / 2 // longer than a lease: without a fence, A would still run when B claims
	started := make(chan struct{}, 64)
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
				return context.Cause(ctx)
			}
			ok.Record(msgs...)
			return nil
		}
	}
	a, f := x.faultyNode(txmq.NodeOptions{})
	if fault == "fail" {
		f.extendFails.Store(true)
	}
	listen(x, rec, q, a, fn(true))
	keys := publishKeys(x, q, a, "lease", 4, 1)
	for range n {
		select {
		case <-started:
		case <-time.After(x.Caps.Timeout):
			x.T.Fatalf("node A did not take both slots")
		}
	}
	switch fault {
	case "pause":
		txmqtest.Freeze(a)
		time.AfterFunc(2*x.Caps.Lease, func() { txmqtest.Thaw(a) })
	case "crash":
		txmqtest.Halt(a)
	}
	b := x.node(txmq.NodeOptions{})
	listen(x, rec, q, b, fn(false))
	waitDelivered(x, ok, keys)
	nodes := []*txmq.Node{b}
	if fault != "crash" {
		nodes = append(nodes, a)
	}
	x.idle(nodes...)
	if p := rec.Peak(q.Name()); p > n {
		x.T.Fatalf("peak %d batches running at once (fault %q on node A); ClusterLimit is %d: A must stop its listeners before its leases can end", p, fault, n)
	}
	if fault != "crash" && a.Stats().LeaseLost == 0 {
		x.T.Fatalf("node A reports no lost lease; want it to fence itself")
	}
	assertSame(x, ok, keys)
}

// limitsThroughOutbox: messages published in RunInTx (the outbox: rows, then the relay) to a
// queue with ClusterLimit 2 run at most 2 at once across three nodes, and all of them run.
func limitsThroughOutbox(x *X) {
	x.needLimits()
	const n = 2
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require, ClusterLimit: n, MaxBatchMessages: 1})
	ctr := newLimitCounter(n)
	rec := newRecorder()
	nodes := threeNodes(x, rec, q, ctr.listener(x, func(Msg) string { return "" }, nil))
	s := x.store(x.rawClient(), outbox.Options{})
	var keys []string
	if err := s.RunInTx(x.ctx(), func(ctx context.Context, _ pgx.Tx) error {
		keys = publishKeysCtx(ctx, x, q, nodes[0], "ob", 16, 4)
		return nil
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitDelivered(x, rec, keys)
	x.idle(nodes...)
	assertSame(x, rec, keys)
	ctr.check(x, n, 0)
}

// limitsOrdered: an Ordered queue with ClusterLimit 2 and four ordering keys: at most 2 batches
// run at once across three nodes, 2 do, and each key's messages run in publish order.
func limitsOrdered(x *X) {
	x.needLimits()
	if err := core.OrdersKeys(x.rawClient()); err != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
	}
	const n = 2
	q := declare(x, txmq.QueueConfig[Msg]{Ordered: true, ClusterLimit: n, MaxBatchMessages: 1})
	ctr := newLimitCounter(n)
	var mu sync.Mutex
	last := map[string]int{}
	var disorder []string
	count := ctr.listener(x, func(Msg) string { return "" }, nil)
	rec := newRecorder()
	nodes := threeNodes(x, rec, q, func(ctx context.Context, msgs []Msg) error {
		m := msgs[0]
		i, _ := strconv.Atoi(m.K[strings.LastIndexByte(m.K, '-')+1:])
		mu.Lock()
		if prev, seen := last[m.P]; seen && i < prev {
			disorder = append(disorder, fmt.Sprintf("%s after %s-%d", m.K, m.P, prev))
		}
		last[m.P] = i
		mu.Unlock()
		return count(ctx, msgs)
	})
	var keys []string
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		for i := range 5 {
			m := Msg{K: fmt.Sprintf("%s-%d", k, i), P: k}
			keys = append(keys, m.K)
			if err := q.Publish(x.ctx(), nodes[0], m, txmq.Key(k)); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
		}
	}
	waitDelivered(x, rec, keys)
	x.idle(nodes...)
	assertSame(x, rec, keys)
	ctr.check(x, n, 0)
	mu.Lock()
	defer mu.Unlock()
	if len(disorder) > 0 {
		x.T.Fatalf("messages of an ordering key ran out of order: %s", strings.Join(limit(disorder, 5), "; "))
	}
}
