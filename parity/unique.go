package parity

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// The group "unique" checks unique jobs (txmq.QueueConfig.Unique, core.UniqueKeeper): each
// mode keeps a second publish of a key out for as long as it promises, counts it in
// Stats.Deduplicated and returns no error to the publisher, through direct publishes from
// two nodes and through the outbox (RunInTx, the relay and the sweep). On an adapter without
// the capability (or without a mode) the property checks that a node refuses the queue with
// an error naming the queue and the mode, and is counted "not supported by the adapter".

func init() {
	register("unique",
		property{name: "declare", run: uniqueDeclare},
		property{name: "window", run: uniqueWindow},
		property{name: "until_started", run: uniqueUntilStarted},
		property{name: "until_done", run: uniqueUntilDone},
		property{name: "debounce", run: uniqueDebounce},
		property{name: "debounce_on_fair_queue", run: uniqueDebounceFair},
		property{name: "retry", run: uniqueRetry},
		property{name: "through_outbox", run: uniqueOutbox},
		property{name: "ledger_mode", run: uniqueLedgerMode},
	)
}

// needUnique ends a property on an adapter that does not keep unique keys in mode m, after
// checking that a node refuses a queue asking for it (ErrInvalidConfig naming the queue and
// the mode); counted as not supported.
func (x *X) needUnique(m txmq.UniqueMode, window time.Duration) {
	x.T.Helper()
	err := core.KeepsUnique(x.rawClient(), m)
	if err == nil {
		return
	}
	q := declare(x, txmq.QueueConfig[Msg]{Unique: txmq.Unique{Mode: m, Window: window}})
	c, _ := x.client()
	_, nerr := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger})
	if nerr == nil || !errors.Is(nerr, core.ErrInvalidConfig) || !strings.Contains(nerr.Error(), q.Name()) || !strings.Contains(nerr.Error(), m.String()) {
		x.T.Fatalf("NewNode with queue %q (Unique %v) on adapter %s that does not keep unique keys: %v; want ErrInvalidConfig naming the queue and the mode", q.Name(), m, x.h.Name(), nerr)
	}
	x.unsupported.Store(true)
	x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
}

// uniqueRuns records the messages (Msg.K) each run of a unique queue got, in order.
type uniqueRuns struct {
	mu   sync.Mutex
	runs []string
}

func (r *uniqueRuns) add(k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, k)
}

func (r *uniqueRuns) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs)
}

func (r *uniqueRuns) has(k string) func() bool {
	return func() bool { return slices.Contains(r.list(), k) }
}

// flushed waits until the nodes' buffers are empty: every publish reached the backend.
func (x *X) flushed(nodes ...*txmq.Node) {
	x.T.Helper()
	x.eventually(func() bool {
		for _, n := range nodes {
			if n.Stats().Buffered > 0 {
				return false
			}
		}
		return true
	}, "the publishes flushed to the backend")
}

// pubK publishes Msg{K: k} with unique key key on n, failing on an error.
func pubK(x *X, q *txmq.Queue[Msg], n *txmq.Node, k, key string) {
	x.T.Helper()
	if err := q.Publish(context.Background(), n, Msg{K: k}, txmq.UniqueKey(key)); err != nil {
		x.T.Fatalf("Publish %s with unique key %s: %v (a duplicate is not an error)", k, key, err)
	}
}

// expectRuns fails unless the runs are exactly want (in any order) and the nodes counted dups
// messages left out.
func expectRuns(x *X, r *uniqueRuns, want []string, dups int64, nodes ...*txmq.Node) {
	x.T.Helper()
	got := r.list()
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		x.T.Errorf("runs %q, want %q", got, w)
	}
	var d int64
	for _, n := range nodes {
		d += n.Stats().Deduplicated
	}
	if d != dups {
		x.T.Errorf("Stats.Deduplicated %d, want %d (every message left out is counted)", d, dups)
	}
}

// uniqueDeclare: a node accepts a unique queue of every mode the adapter keeps and refuses the
// others naming the queue and the mode; a UniqueKey on a queue without Unique is an error.
func uniqueDeclare(x *X) {
	plain := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	if err := plain.Publish(context.Background(), n, Msg{K: "a"}, txmq.UniqueKey("k")); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), plain.Name()) {
		x.T.Fatalf("UniqueKey on queue %q without Unique: %v; want ErrInvalidConfig naming the queue", plain.Name(), err)
	}
	for _, m := range []txmq.UniqueMode{txmq.UniqueWindow, txmq.UniqueUntilStarted, txmq.UniqueUntilDone, txmq.UniqueDebounce} {
		var w time.Duration
		if m == txmq.UniqueWindow || m == txmq.UniqueDebounce {
			w = time.Second
		}
		reg := txmq.NewRegistry()
		q, err := txmq.DeclareIn(reg, x.queueName(), txmq.QueueConfig[Msg]{Transactional: txmq.Try, Unique: txmq.Unique{Mode: m, Window: w}})
		if err != nil {
			x.T.Fatalf("declare Unique %v: %v", m, err)
		}
		c, _ := x.client()
		_, nerr := txmq.NewNode(c, &txmq.NodeOptions{Registry: reg, Logger: x.logger})
		kerr := core.KeepsUnique(x.rawClient(), m)
		switch {
		case kerr == nil && nerr != nil:
			x.T.Errorf("NewNode with queue %q (Unique %v) on an adapter that keeps the mode: %v", q.Name(), m, nerr)
		case kerr != nil && (nerr == nil || !errors.Is(nerr, core.ErrInvalidConfig) || !strings.Contains(nerr.Error(), q.Name()) || !strings.Contains(nerr.Error(), m.String())):
			x.T.Errorf("NewNode with queue %q (Unique %v) on an adapter that does not keep it: %v; want ErrInvalidConfig naming the queue and the mode", q.Name(), m, nerr)
		}
	}
}

// uniqueWindow: within the window a key published again (from another node, and again from
// the first) is left out, a second key is not; the repeats are counted.
func uniqueWindow(x *X) {
	x.needUnique(txmq.UniqueWindow, dedupLongWindow)
	q := declare(x, txmq.QueueConfig[Msg]{Unique: txmq.Unique{Mode: txmq.UniqueWindow, Window: dedupLongWindow}})
	a, b := x.node(txmq.NodeOptions{Lease: dedupLease}), x.node(txmq.NodeOptions{Lease: dedupLease})
	var r uniqueRuns
	if err := q.Listen(a, func(_ context.Context, msgs []Msg) error {
		for _, m := range msgs {
			r.add(m.K)
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	pubK(x, q, a, "x#1", "x")
	x.eventually(r.has("x#1"), "the first publish of key x ran")
	pubK(x, q, b, "x#2", "x") // after it ran: still within the window
	pubK(x, q, a, "x#3", "x")
	pubK(x, q, a, "y#1", "y")
	x.eventually(r.has("y#1"), "key y ran")
	x.flushed(a, b)
	sleep(300 * time.Millisecond) // give a wrong run the chance to show
	x.idle(a, b)
	expectRuns(x, &r, []string{"x#1", "y#1"}, 2, a, b)
}

// blockingListen registers a listener on n that records each message and then waits for
// release (closed) before it returns; started receives each message as its run begins.
func blockingListen(x *X, q *txmq.Queue[Msg], n *txmq.Node, r *uniqueRuns, started chan<- string, release <-chan struct{}) {
	x.T.Helper()
	if err := q.Listen(n, func(ctx context.Context, msgs []Msg) error {
		for _, m := range msgs {
			r.add(m.K)
			started <- m.K
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
}

// uniqueUntilStarted: while the key's first batch waits unstarted a second publish is left
// out; once its run started, a third is stored and runs.
func uniqueUntilStarted(x *X) {
	x.needUnique(txmq.UniqueUntilStarted, 0)
	q := declare(x, txmq.QueueConfig[Msg]{Unique: txmq.Unique{Mode: txmq.UniqueUntilStarted}})
	pubN := x.node(txmq.NodeOptions{Lease: dedupLease})
	pubK(x, q, pubN, "k#1", "k")
	x.flushed(pubN)
	pubK(x, q, pubN, "k#2", "k") // k#1 not started: left out
	x.flushed(pubN)
	var r uniqueRuns
	started, release := make(chan string, 8), make(chan struct{})
	defer close(release)
	runN := x.node(txmq.NodeOptions{Lease: dedupLease})
	blockingListen(x, q, runN, &r, started, release)
	select {
	case k := <-started:
		if k != "k#1" {
			x.T.Fatalf("the first run got %s, want k#1 (k#2 was published while k#1 had not started)", k)
		}
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("k#1 did not start within %v", x.Caps.Timeout)
	}
	pubK(x, q, pubN, "k#3", "k") // k#1 started: stored
	x.eventually(r.has("k#3"), "k#3, published once k#1 started, ran")
	x.flushed(pubN)
	expectRuns(x, &r, []string{"k#1", "k#3"}, 1, pubN, runN)
}

// uniqueUntilDone: while the key's first batch runs a second publish is left out; once it
// is done (acked) a third runs.
func uniqueUntilDone(x *X) {
	x.needUnique(txmq.UniqueUntilDone, 0)
	q := declare(x, txmq.QueueConfig[Msg]{Unique: txmq.Unique{Mode: txmq.UniqueUntilDone}})
	n := x.node(txmq.NodeOptions{Lease: dedupLease})
	other := x.node(txmq.NodeOptions{Lease: dedupLease})
	var r uniqueRuns
	started, release := make(chan string, 8), make(chan struct{})
	blockingListen(x, q, n, &r, started, release)
	pubK(x, q, n, "k#1", "k")
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("k#1 did not start within %v", x.Caps.Timeout)
	}
	pubK(x, q, other, "k#2", "k") // running: left out
	pubK(x, q, n, "k#3", "k")     // running: left out
	x.flushed(n, other)
	close(release)
	x.eventually(func() bool {
		d, err := n.Depths(x.ctx())
		return err == nil && d[q.Name()].Ready+d[q.Name()].InFlight+d[q.Name()].Delayed == 0
	}, "k#1 acked: the queue is empty")
	pubK(x, q, other, "k#4", "k") // done: stored
	x.eventually(r.has("k#4"), "k#4, published once k#1 was done, ran")
	x.flushed(n, other)
	sleep(300 * time.Millisecond)
	x.idle(n, other)
	expectRuns(x, &r, []string{"k#1", "k#4"}, 2, n, other)
}

// debounceRounds runs try with a debounce window: x.window(3 s) (the publishes must land well
// within it: longer on a loaded machine), then, while try finds its publishes took more than
// half the window (too slow to judge it: a loaded machine, not a verdict), again on a fresh
// queue with the window doubled, three rounds in all.
func debounceRounds(x *X, try func(window time.Duration) bool) {
	x.T.Helper()
	window := x.window(3 * time.Second)
	x.needUnique(txmq.UniqueDebounce, window)
	const rounds = 3
	for round := range rounds {
		if try(window) {
			return
		}
		if round == rounds-1 {
			x.T.Fatalf("the publishes took more than half the debounce window in each of %d rounds, up to %v: too slow to judge it", rounds, window)
		}
		window *= 2
	}
}

// tooSlow reports (and logs) whether publishes that began at start took more than half of
// window (see debounceRounds).
func tooSlow(x *X, start time.Time, window time.Duration) bool {
	if el := time.Since(start); el > window/2 {
		x.T.Logf("the publishes took %v: too slow to judge a %v debounce; again with a window of %v", el, window, 2*window)
		return true
	}
	return false
}

// uniqueDebounce: publishes of a key within the window replace each other; the last one runs,
// once, after the key stayed quiet for the window; a publish after that runs too.
func uniqueDebounce(x *X) {
	debounceRounds(x, func(window time.Duration) bool { return debounceOnce(x, window) })
}

// debounceOnce is one round of uniqueDebounce; false when its publishes were too slow.
func debounceOnce(x *X, window time.Duration) bool {
	q := declare(x, txmq.QueueConfig[Msg]{Unique: txmq.Unique{Mode: txmq.UniqueDebounce, Window: window}})
	a, b := x.node(txmq.NodeOptions{Lease: dedupLease}), x.node(txmq.NodeOptions{Lease: dedupLease})
	var r uniqueRuns
	if err := q.Listen(a, func(_ context.Context, msgs []Msg) error {
		for _, m := range msgs {
			r.add(m.K)
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	start := time.Now()
	pubK(x, q, a, "k#1", "k")
	x.flushed(a)
	pubK(x, q, b, "k#2", "k")
	x.flushed(b)
	pubK(x, q, a, "k#3", "k")
	x.flushed(a)
	if tooSlow(x, start, window) {
		return false
	}
	x.eventually(r.has("k#3"), "the last publish ran after the quiet window")
	if got := r.list(); len(got) != 1 {
		x.T.Fatalf("runs %q: only the last publish of the window should run", got)
	}
	pubK(x, q, b, "k#4", "k")
	x.eventually(r.has("k#4"), "a publish after the debounced run ran")
	x.idle(a, b)
	expectRuns(x, &r, []string{"k#3", "k#4"}, 0, a, b)
	return true
}

// uniqueDebounceFair: on a Fair queue, a debounce that replaces its unstarted holder takes it
// out of its fairness key's turn as well: the backend's turn never hands out the removed batch
// (nor stalls on it), the last publish of the window runs once, and another key's batches,
// published before and after, all run.
func uniqueDebounceFair(x *X) {
	x.needFair()
	debounceRounds(x, func(window time.Duration) bool { return debounceFairOnce(x, window) })
}

// debounceFairOnce is one round of uniqueDebounceFair; false when its publishes were too slow.
func debounceFairOnce(x *X, window time.Duration) bool {
	q := declare(x, txmq.QueueConfig[Msg]{Fair: true, Unique: txmq.Unique{Mode: txmq.UniqueDebounce, Window: window}})
	n := x.node(txmq.NodeOptions{Lease: dedupLease})
	var r uniqueRuns
	if err := q.Listen(n, func(_ context.Context, msgs []Msg) error {
		for _, m := range msgs {
			r.add(m.K)
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	pub := func(k, key, tenant string) {
		x.T.Helper()
		if err := q.Publish(context.Background(), n, Msg{K: k}, txmq.UniqueKey(key), txmq.FairKey(tenant)); err != nil {
			x.T.Fatalf("Publish %s (unique key %s, fair key %s): %v", k, key, tenant, err)
		}
		x.flushed(n)
	}
	start := time.Now()
	pub("o#1", "o1", "t2")
	pub("k#1", "k", "t1")
	pub("k#2", "k", "t1")
	pub("k#3", "k", "t1")
	pub("o#2", "o2", "t2")
	if tooSlow(x, start, window) {
		return false
	}
	x.eventually(r.has("k#3"), "the last publish of the window ran")
	x.eventually(r.has("o#2"), "the other tenant's batches ran")
	x.idle(n)
	expectRuns(x, &r, []string{"k#3", "o#1", "o#2"}, 0, n)
	return true
}

// uniqueOutbox: the check happens where the message reaches the backend, so publishes in
// transactions (the relay after commit, and the sweep for a row whose reply was lost) are
// deduplicated with direct ones: one run per key.
func uniqueOutbox(x *X) {
	x.needUnique(txmq.UniqueWindow, dedupLongWindow)
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try, Unique: txmq.Unique{Mode: txmq.UniqueWindow, Window: dedupLongWindow}})
	n := x.node(txmq.NodeOptions{Lease: dedupLease})
	var r uniqueRuns
	if err := q.Listen(n, func(_ context.Context, msgs []Msg) error {
		for _, m := range msgs {
			r.add(m.K)
		}
		return nil
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	lost := x.store(lostReply{x.rawClient()}, outbox.Options{})
	if err := runInTx(x.ctx(), lost, func(ctx context.Context) error {
		return q.Publish(ctx, n, Msg{K: "o#tx1"}, txmq.UniqueKey("o"))
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitStoreIdle(x, lost)
	live := x.sameSchemaStore(lost, x.rawClient(), outbox.Options{RecoveryAge: 100 * time.Millisecond})
	x.eventually(func() bool {
		if _, err := live.SweepOnce(x.ctx()); err != nil {
			x.T.Logf("SweepOnce: %v", err)
		}
		return outboxRows(x, live) == 0
	}, "the sweep publishes the row again (its own batch: stored once) and deletes it")
	if err := runInTx(x.ctx(), live, func(ctx context.Context) error {
		return q.Publish(ctx, n, Msg{K: "o#tx2"}, txmq.UniqueKey("o"))
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	pubK(x, q, n, "o#direct", "o")
	pubK(x, q, n, "p#direct", "p")
	x.eventually(func() bool {
		if outboxRows(x, live) > 0 {
			if _, err := live.SweepOnce(x.ctx()); err != nil {
				x.T.Logf("SweepOnce: %v", err)
			}
		}
		return r.has("p#direct")() && outboxRows(x, live) == 0
	}, "key p ran and the outbox is empty")
	x.flushed(n)
	sleep(300 * time.Millisecond)
	x.idle(n)
	got := r.list()
	slices.Sort(got)
	if !slices.Equal(got, []string{"o#tx1", "p#direct"}) {
		x.T.Errorf("runs %q, want o#tx1 and p#direct (the repeats of key o through the outbox and direct left out)", got)
	}
}

// uniqueLedgerMode: in ledger mode the batches left out (a direct publish and a transaction's,
// relayed through the ledger's Keeping backend) are not kept by the ledger: once the key's
// first batch is done, the republisher does not bring them back past its horizon, and the
// ledger keeps nothing.
func uniqueLedgerMode(x *X) {
	x.needUnique(txmq.UniqueUntilDone, 0)
	horizon := 2 * time.Second
	lg := x.ledgerModeLedger(horizon)
	q := declare(x, txmq.QueueConfig[Msg]{Transactional: txmq.Try, Unique: txmq.Unique{Mode: txmq.UniqueUntilDone}})
	be, _ := x.client()
	n := x.nodeOn(be, txmq.NodeOptions{Ledger: lg, Lease: dedupLease})
	store := x.store(lg.Keeping(be), outbox.Options{})
	var r uniqueRuns
	started, release := make(chan string, 8), make(chan struct{})
	blockingListen(x, q, n, &r, started, release)
	pubK(x, q, n, "k#1", "k")
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("k#1 did not start within %v", x.Caps.Timeout)
	}
	pubK(x, q, n, "k#2", "k") // running: left out
	if err := runInTx(x.ctx(), store, func(ctx context.Context) error {
		return q.Publish(ctx, n, Msg{K: "k#tx"}, txmq.UniqueKey("k"))
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	x.flushed(n)
	x.eventually(func() bool { return outboxRows(x, store) == 0 }, "the transaction's row relayed (and left out)")
	close(release)
	x.eventually(func() bool {
		k, err := lg.KeptBatches(context.Background())
		return err == nil && k == 0
	}, "the ledger keeps no batch: k#1 done, the ones left out never kept")
	time.Sleep(2*horizon + 500*time.Millisecond) // a kept copy would be republished by now
	x.idle(n)
	expectRuns(x, &r, []string{"k#1"}, 1, n)
}

// uniqueRetry: a batch whose first run failed and waits for its retry has started (its key is
// free for UniqueUntilStarted, even after the retry rewrote it) and is not done (its key is
// still held for UniqueUntilDone).
func uniqueRetry(x *X) {
	x.needUnique(txmq.UniqueUntilStarted, 0)
	x.needUnique(txmq.UniqueUntilDone, 0)
	started := declare(x, txmq.QueueConfig[Msg]{Unique: txmq.Unique{Mode: txmq.UniqueUntilStarted}})
	done := declare(x, txmq.QueueConfig[Msg]{Unique: txmq.Unique{Mode: txmq.UniqueUntilDone}})
	n := x.node(txmq.NodeOptions{Lease: dedupLease})
	wait := x.window(3 * time.Second)
	var rs, rd uniqueRuns
	failed := make(chan string, 4)
	failFirst := func(r *uniqueRuns) func(context.Context, []Msg) error {
		return func(_ context.Context, msgs []Msg) error {
			for _, m := range msgs {
				r.add(m.K)
				if m.K == "k#1" && strings.Count(strings.Join(r.list(), ","), "k#1") == 1 {
					failed <- m.K
					return txmq.RetryAfter(wait, errors.New("parity: the first run fails"))
				}
			}
			return nil
		}
	}
	if err := started.Listen(n, failFirst(&rs)); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	if err := done.Listen(n, failFirst(&rd)); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	pubK(x, started, n, "k#1", "k")
	pubK(x, done, n, "k#1", "k")
	for range 2 {
		select {
		case <-failed:
		case <-time.After(x.Caps.Timeout):
			x.T.Fatalf("the first runs did not fail within %v", x.Caps.Timeout)
		}
	}
	x.eventually(func() bool {
		ds, err := n.Depths(x.ctx())
		return err == nil && ds[started.Name()].Delayed+ds[started.Name()].Ready == 1 && ds[done.Name()].Delayed+ds[done.Name()].Ready == 1
	}, "both first batches wait for their retry")
	pubK(x, started, n, "k#2", "k") // k#1 started: stored
	pubK(x, done, n, "k#2", "k")    // k#1 not done: left out
	x.flushed(n)
	x.eventually(func() bool {
		return slices.Equal(sortedRuns(&rs), []string{"k#1", "k#1", "k#2"}) && slices.Equal(sortedRuns(&rd), []string{"k#1", "k#1"})
	}, func() string {
		return "UniqueUntilStarted: k#1 twice and k#2; UniqueUntilDone: k#1 twice; got " + strings.Join(rs.list(), ",") + " and " + strings.Join(rd.list(), ",")
	})
	x.idle(n)
	if d := n.Stats().Deduplicated; d != 1 {
		x.T.Errorf("Stats.Deduplicated %d, want 1", d)
	}
}

// sortedRuns returns r's runs, sorted.
func sortedRuns(r *uniqueRuns) []string {
	got := r.list()
	slices.Sort(got)
	return got
}
