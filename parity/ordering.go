package parity

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// The group "ordering" checks per-key order (txmq.QueueConfig.Ordered, core.KeyOrderer). On an
// adapter without the capability only "declare" runs for real (it asserts the refusal); every
// other property is counted as "not supported by the adapter", never as passed.

func init() {
	register("ordering",
		property{name: "declare", run: orderingDeclare},
		property{name: "order_within_key_three_nodes", dup: true, run: orderThreeNodes},
		property{name: "failing_batch_blocks_only_its_key", run: orderFailingBlocksKey},
		property{name: "lost_lease_redelivers_first", run: orderLostLease},
		property{name: "order_through_outbox", dup: true, run: orderThroughOutbox},
		property{name: "thousand_keys_interleaved", dup: true, run: orderThousandKeys},
		property{name: "delay_holds_back_its_key", dup: true, run: orderDelays},
	)
}

// ordersKeys reports whether the adapter enforces per-key order (nil), asking a raw client.
func (x *X) ordersKeys() error { return core.OrdersKeys(x.rawClient()) }

// needOrdering ends a property on an adapter without per-key ordering, counted as not
// supported (neither passed nor failed).
func (x *X) needOrdering() {
	x.T.Helper()
	if err := x.ordersKeys(); err != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
	}
}

// orderingDeclare: on an adapter without per-key ordering, an Ordered queue is refused with an
// error naming the queue and the adapter, by NewNode (declared before) and by Listen and
// Publish (declared after the node). On one with it, the node takes the queue, a publish
// without a key is an error naming the queue, and a key on an unordered queue is one too.
func orderingDeclare(x *X) {
	if oerr := x.ordersKeys(); oerr != nil {
		q := declare(x, txmq.QueueConfig[Msg]{Ordered: true})
		c, _ := x.client()
		_, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger})
		x.refused(err, q.Name(), "NewNode")
		reg := txmq.NewRegistry()
		n := x.nodeOnRegistry(reg)
		q2, derr := txmq.DeclareIn(reg, x.queueName(), txmq.QueueConfig[Msg]{Transactional: txmq.Try, Ordered: true})
		if derr != nil {
			x.T.Fatalf("DeclareIn: %v", derr)
		}
		x.refused(q2.Listen(n, func(context.Context, []Msg) error { return nil }), q2.Name(), "Listen")
		x.refused(q2.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("k")), q2.Name(), "Publish")
		return
	}
	q := declare(x, txmq.QueueConfig[Msg]{Ordered: true})
	plain := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	if err := q.Publish(context.Background(), n, Msg{K: "a"}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), q.Name()) {
		x.T.Fatalf("Publish without a key on an Ordered queue: %v; want ErrInvalidConfig naming queue %q", err, q.Name())
	}
	if err := plain.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("k")); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), plain.Name()) {
		x.T.Fatalf("Publish with a key on an unordered queue: %v; want ErrInvalidConfig naming queue %q", err, plain.Name())
	}
	if err := q.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("has space")); !errors.Is(err, core.ErrInvalidConfig) {
		x.T.Fatalf("Publish with key %q: %v; want ErrInvalidConfig (not portable)", "has space", err)
	}
	if err := q.Publish(context.Background(), n, Msg{K: "a"}, txmq.Key("acct-42")); err != nil {
		x.T.Fatalf("Publish with a key: %v", err)
	}
}

// nodeOnRegistry makes a started node on a new client with reg as its registry.
func (x *X) nodeOnRegistry(reg *txmq.Registry) *txmq.Node {
	x.T.Helper()
	c, _ := x.client()
	n, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: reg, Logger: x.logger, Lease: x.Caps.Lease, PollWait: x.Caps.PollWait})
	if err != nil {
		x.T.Fatalf("NewNode: %v", err)
	}
	x.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

// refused fails unless err is ErrInvalidConfig naming the queue and the adapter.
func (x *X) refused(err error, queue, call string) {
	x.T.Helper()
	if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "does not") {
		x.T.Fatalf("%s with Ordered queue %q on adapter %s: %v; want ErrInvalidConfig naming the queue and saying the adapter does not order by key", call, queue, x.h.Name(), err)
	}
}

// ordered declares an Ordered queue (Try unless cfg says otherwise).
func ordered(x *X, cfg txmq.QueueConfig[Msg]) *txmq.Queue[Msg] {
	cfg.Ordered = true
	return declare(x, cfg)
}

// seqMsg is message seq of key: Msg.K is "key#seq".
func seqMsg(key string, seq int) Msg { return Msg{K: key + "#" + strconv.Itoa(seq)} }

// orderLog checks what listeners receive on an ordered queue: every batch holds one key, at
// most one batch per key runs at a time, and a message is delivered only once every earlier
// message of its key was (a repeat of an earlier one is allowed: at-least-once).
type orderLog struct {
	mu      sync.Mutex
	next    map[string]int       // per key, the lowest sequence number not delivered yet
	active  map[string]int       // per key, runs in progress
	first   map[string]time.Time // per "key#seq", its first delivery
	bad     []string
	batches int
}

func newOrderLog() *orderLog {
	return &orderLog{next: map[string]int{}, active: map[string]int{}, first: map[string]time.Time{}}
}

func splitSeq(k string) (string, int) {
	i := strings.LastIndexByte(k, '#')
	if i < 0 {
		return k, -1
	}
	n, err := strconv.Atoi(k[i+1:])
	if err != nil {
		return k, -1
	}
	return k[:i], n
}

// begin records the start of a run of msgs; call the returned func when it ends.
func (o *orderLog) begin(msgs []Msg) (end func()) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batches++
	if len(msgs) == 0 {
		o.bad = append(o.bad, "an empty batch")
		return func() {}
	}
	key, _ := splitSeq(msgs[0].K)
	o.active[key]++
	if o.active[key] > 1 {
		o.bad = append(o.bad, fmt.Sprintf("key %s: %d batches running at once", key, o.active[key]))
	}
	for _, m := range msgs {
		k, seq := splitSeq(m.K)
		if k != key {
			o.bad = append(o.bad, fmt.Sprintf("one batch holds keys %s and %s", key, k))
			continue
		}
		if seq > o.next[k] {
			o.bad = append(o.bad, fmt.Sprintf("key %s: message %d delivered before message %d", k, seq, o.next[k]))
		}
		if seq == o.next[k] {
			o.next[k]++
		}
		if _, ok := o.first[m.K]; !ok {
			o.first[m.K] = now
		}
	}
	return func() {
		o.mu.Lock()
		o.active[key]--
		o.mu.Unlock()
	}
}

// delivered reports how many messages of key were delivered in order from 0.
func (o *orderLog) delivered(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next[key]
}

// firstAt returns when message seq of key was first delivered (zero: not yet).
func (o *orderLog) firstAt(key string, seq int) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.first[key+"#"+strconv.Itoa(seq)]
}

// complete reports whether every key of want got all its messages.
func (o *orderLog) complete(want map[string]int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, n := range want {
		if o.next[k] < n {
			return false
		}
	}
	return true
}

// summary says what is missing and what went wrong, for a failed wait.
func (o *orderLog) summary(want map[string]int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	missing, firstKey := 0, "-"
	for k, n := range want {
		if o.next[k] < n {
			if missing == 0 {
				firstKey = fmt.Sprintf("%s (%d of %d)", k, o.next[k], n)
			}
			missing++
		}
	}
	return fmt.Sprintf("%d of %d keys incomplete (first: %s); %d batches; %d violations (%s)", missing, len(want), firstKey, o.batches, len(o.bad), strings.Join(limit(o.bad, 3), "; "))
}

// check fails the property on any violation.
func (o *orderLog) check(x *X) {
	x.T.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bad) > 0 {
		x.T.Fatalf("per-key order broken %d time(s): %s", len(o.bad), strings.Join(limit(o.bad, 5), "; "))
	}
}

// listener returns a listener that checks order, then calls fn (nil: succeed).
func (o *orderLog) listener(fn func(ctx context.Context, msgs []Msg) error) func(ctx context.Context, msgs []Msg) error {
	return func(ctx context.Context, msgs []Msg) error {
		end := o.begin(msgs)
		defer end()
		if fn == nil {
			return nil
		}
		return fn(ctx, msgs)
	}
}

// listenOrdered registers o's checking listener for q on n.
func listenOrdered(x *X, o *orderLog, q *txmq.Queue[Msg], n *txmq.Node, fn func(ctx context.Context, msgs []Msg) error) {
	x.T.Helper()
	if err := q.Listen(n, o.listener(fn)); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
}

// publishInterleaved publishes per messages for each of keys, one message per call, key after
// key (round robin), on n with ctx and opts; it returns the messages per key.
func publishInterleaved(ctx context.Context, x *X, q *txmq.Queue[Msg], n *txmq.Node, keys []string, per int, opts ...txmq.PublishOption) map[string]int {
	x.T.Helper()
	for seq := range per {
		for _, k := range keys {
			if err := q.Publish(ctx, n, seqMsg(k, seq), append([]txmq.PublishOption{txmq.Key(k)}, opts...)...); err != nil {
				x.T.Fatalf("Publish %s#%d on %q: %v", k, seq, q.Name(), err)
			}
		}
	}
	want := make(map[string]int, len(keys))
	for _, k := range keys {
		want[k] = per
	}
	return want
}

func keyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return keys
}

// waitOrdered waits until every key got its messages, then checks the order.
func waitOrdered(x *X, o *orderLog, want map[string]int) {
	x.T.Helper()
	x.eventually(func() bool { return o.complete(want) }, func() string { return "every message delivered: " + o.summary(want) })
	o.check(x)
}

// orderThreeNodes: 12 keys of 25 messages, published one per call, interleaved, on a queue cut
// into batches of at most 3 messages, consumed by 3 nodes whose listener takes a random time:
// each key's messages arrive in publish order, one batch per key at a time.
func orderThreeNodes(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 3})
	o := newOrderLog()
	random := func(ctx context.Context, _ []Msg) error {
		select {
		case <-time.After(time.Duration(rand.IntN(15)) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	nodes := []*txmq.Node{x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})}
	for _, n := range nodes {
		listenOrdered(x, o, q, n, random)
	}
	// Two publish rounds, so keys also span flushes.
	keys := keyNames("k", 12)
	want := publishInterleaved(context.Background(), x, q, nodes[0], keys, 10)
	sleep(150 * time.Millisecond)
	for seq := 10; seq < 25; seq++ {
		for _, k := range keys {
			if err := q.Publish(context.Background(), nodes[0], seqMsg(k, seq), txmq.Key(k)); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
		}
	}
	for _, k := range keys {
		want[k] = 25
	}
	waitOrdered(x, o, want)
	x.idle(nodes...)
	o.check(x)
}

// orderFailingBlocksKey: key "a"'s first batch fails every run until it is dead-lettered; until
// then the rest of "a" waits while key "b" is delivered in full; then "a" moves on, in order.
func orderFailingBlocksKey(x *X) {
	x.needOrdering()
	const budget = 3
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1, MaxAttempts: budget})
	o := newOrderLog()
	release := make(chan struct{})
	var mu sync.Mutex
	headRuns := 0
	n := x.node(txmq.NodeOptions{Backoff: func(int) time.Duration { return 100 * time.Millisecond }})
	listenOrdered(x, o, q, n, func(ctx context.Context, msgs []Msg) error {
		if msgs[0].K != "a#0" {
			return nil
		}
		mu.Lock()
		headRuns++
		runs := headRuns
		mu.Unlock()
		if runs < budget {
			return errBoom
		}
		select { // the last run waits, so the test can look at key b meanwhile
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return errBoom
	})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	x.T.Cleanup(open)
	publishInterleaved(context.Background(), x, q, n, []string{"a", "b"}, 5)
	x.eventually(func() bool { return o.delivered("b") == 5 }, func() string { return fmt.Sprintf("key b delivered while a is blocked: %d of 5", o.delivered("b")) })
	x.eventually(func() bool { mu.Lock(); defer mu.Unlock(); return headRuns >= budget }, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("the head of key a reaches its last run (%d runs so far of %d; %d dead letters)", headRuns, budget, x.DeadLetters.Count(q.Name()))
	})
	if o.firstAt("a", 1) != (time.Time{}) {
		x.T.Fatalf("a#1 was delivered while a#0 was still failing")
	}
	open()
	x.eventually(func() bool { return x.DeadLetters.Count(q.Name()) == 1 }, "a#0 dead-lettered")
	x.eventually(func() bool { return o.firstAt("a", 4) != (time.Time{}) }, "the rest of key a delivered after its head was dead-lettered")
	for seq := 2; seq <= 4; seq++ {
		if o.firstAt("a", seq).Before(o.firstAt("a", seq-1)) {
			x.T.Fatalf("a#%d delivered before a#%d", seq, seq-1)
		}
	}
	x.idle(n)
	// a#0 is "delivered" (then dead-lettered): the log saw it, so order from 0 holds.
	o.check(x)
}

// orderLostLease: the node running key k's first batch dies; the batch comes back after its
// lease and runs, on another node, before any later batch of k.
func orderLostLease(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 1})
	o := newOrderLog()
	started := make(chan struct{}, 8)
	a := x.node(txmq.NodeOptions{})
	listenOrdered(x, o, q, a, func(ctx context.Context, msgs []Msg) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	want := publishInterleaved(context.Background(), x, q, a, []string{"k"}, 4)
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("node A never ran the first batch")
	}
	a.Halt()
	// A second log for node B: its first delivery must be k#0 again.
	ob := newOrderLog()
	b := x.node(txmq.NodeOptions{})
	listenOrdered(x, ob, q, b, nil)
	waitOrdered(x, ob, want)
	if got := ob.firstAt("k", 0); got.IsZero() || got.After(ob.firstAt("k", 1)) {
		x.T.Fatalf("after the lost lease k#0 ran at %v, k#1 at %v; want k#0 first", got, ob.firstAt("k", 1))
	}
	x.idle(b)
	o.check(x)
}

// orderThroughOutbox: messages of a key staged in transactions on a Require and a Try queue
// (interleaved across keys, two transactions one after the other) arrive in staging order.
func orderThroughOutbox(x *X) {
	x.needOrdering()
	qr := ordered(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require, MaxBatchMessages: 2})
	qt := ordered(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try, MaxBatchMessages: 2})
	or, ot := newOrderLog(), newOrderLog()
	a, b := x.node(txmq.NodeOptions{}), x.node(txmq.NodeOptions{})
	for _, n := range []*txmq.Node{a, b} {
		listenOrdered(x, or, qr, n, nil)
		listenOrdered(x, ot, qt, n, nil)
	}
	s := x.store(x.rawClient(), outbox.Options{})
	keys := keyNames("t", 5)
	const per = 6
	for half := range 2 {
		if err := s.RunInTx(x.ctx(), func(ctx context.Context, _ pgx.Tx) error {
			for seq := half * per; seq < (half+1)*per; seq++ {
				for _, k := range keys {
					for _, q := range []*txmq.Queue[Msg]{qr, qt} {
						if err := q.Publish(ctx, a, seqMsg(k, seq), txmq.Key(k)); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}); err != nil {
			x.T.Fatalf("RunInTx: %v", err)
		}
	}
	want := map[string]int{}
	for _, k := range keys {
		want[k] = 2 * per
	}
	waitOrdered(x, or, want)
	waitOrdered(x, ot, want)
	x.idle(a, b)
	or.check(x)
	ot.check(x)
}

// orderThousandKeys: 1,000 keys of 2 messages each, published interleaved (one message per
// call, so a key's two messages often land in different flushes and batches), over 2 nodes:
// every key in order, nothing missing.
func orderThousandKeys(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{MaxBatchMessages: 2})
	o := newOrderLog()
	// Thousands of claims on a machine slowed by -race can wait past a one-second lease's fence
	// before they start, and a run whose lease was lost may overlap its redelivery (allowed:
	// at-least-once; orderLostLease covers it). This property is about order across many keys:
	// a lease no dispatch delay outlasts keeps lost leases out of it.
	opts := txmq.NodeOptions{Lease: max(x.Caps.Lease, 15*time.Second)}
	a, b := x.node(opts), x.node(opts)
	listenOrdered(x, o, q, a, nil)
	listenOrdered(x, o, q, b, nil)
	want := publishInterleaved(context.Background(), x, q, a, keyNames("m", 1000), 2)
	// Thousands of batches (twice as many under duplicate delivery, each key's in series):
	// seconds alone, but more than a minute beside the other suites on a loaded CI machine.
	txmqtest.Eventually(x.T, 8*x.Caps.Timeout, func() bool { return o.complete(want) }, func() string { return "every message delivered: " + o.summary(want) })
	o.check(x)
	x.idle(a, b)
	o.check(x)
	if lost := a.Stats().LeaseLost + b.Stats().LeaseLost; lost != 0 {
		x.T.Fatalf("nodes report %d lost leases with a %v lease", lost, opts.Lease)
	}
}

// orderDelays: key "d"'s first message is delayed; the later messages of "d", published without
// a delay, wait for it (never before its due time, and after it), while key "f" flows at once.
func orderDelays(x *X) {
	x.needOrdering()
	q := ordered(x, txmq.QueueConfig[Msg]{})
	o := newOrderLog()
	n := x.node(txmq.NodeOptions{})
	listenOrdered(x, o, q, n, nil)
	delay := 1500 * time.Millisecond
	start := time.Now()
	ctx := context.Background()
	if err := q.Publish(ctx, n, seqMsg("d", 0), txmq.Key("d"), txmq.After(delay)); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	for seq := 1; seq < 4; seq++ {
		if err := q.Publish(ctx, n, seqMsg("d", seq), txmq.Key("d")); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
	}
	want := publishInterleaved(ctx, x, q, n, []string{"f"}, 3)
	want["d"] = 4
	waitOrdered(x, o, want)
	if at := o.firstAt("d", 0); at.Sub(start) < delay {
		x.T.Fatalf("d#0 delivered %v after publish; its delay is %v", at.Sub(start), delay)
	}
	if at := o.firstAt("d", 1); at.Sub(start) < delay {
		x.T.Fatalf("d#1 delivered %v after publish, before the delayed d#0 was due (%v)", at.Sub(start), delay)
	}
	if f, d := o.firstAt("f", 2), o.firstAt("d", 0); !f.Before(d) {
		x.T.Fatalf("key f finished at %v, after the delayed d#0 (%v): a delay of key d held back key f", f.Sub(start), d.Sub(start))
	}
	x.idle(n)
	o.check(x)
}
