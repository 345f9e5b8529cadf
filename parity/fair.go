package parity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
	"github.com/txmq/txmq/txmqtest"
)

// The group "fairness" checks fair share by key (txmq.QueueConfig.Fair, core.FairSharer): a
// key with a backlog of 10,000 batches and a key with one both progress, the lone one within
// fairBound runs of the queue. The queues are Exclusive with one message per batch, so batches
// run one at a time in the order the backend hands them out; the bound is then the
// round-robin's: with two keys holding ready batches, the lone key's batch is claimed at the
// latest after one batch of the other key (and in the "arrives mid-backlog" form after the
// batch that was running when it arrived). Without fairness a random pick would run it after
// about half the backlog, FIFO after all of it. The properties of the other publish paths
// (outbox, handoff, replay) put the backlog in the empty key, so that a lone batch that lost
// its key on the way would join the backlog's lane and fail the bound. On an adapter without the capability only
// "declare" runs for real (it asserts the refusal); every other property is counted as "not
// supported by the adapter", never as passed.

func init() {
	register("fairness",
		property{name: "declare", run: fairDeclare},
		property{name: "lone_key_within_bound", dup: true, run: fairLoneKey},
		property{name: "lone_key_arrives_mid_backlog", dup: true, run: fairMidBacklog},
		property{name: "through_outbox", dup: true, run: fairThroughOutbox},
		property{name: "through_handoff_outage", run: fairThroughHandoff},
		property{name: "dead_letter_replay_keeps_key", run: fairReplay},
		property{name: "with_priorities", dup: true, run: fairWithPriorities},
		property{name: "with_ordering_keys", dup: true, run: fairWithOrdering},
		property{name: "survives_node_restart", run: fairRestart},
	)
}

// fairBacklog is the big key's backlog, fairBound the most runs of the queue the lone key's
// batch may wait for once it is ready, its own run included (two keys: the other key's turn,
// then its own).
const (
	fairBacklog = 10000
	fairBound   = 2
)

// sharesFairly reports whether the adapter shares claims fairly by key (nil), asking a raw
// client.
func (x *X) sharesFairly() error { return core.SharesFairly(x.rawClient()) }

// needFair ends a property on an adapter without fair share, counted as not supported.
func (x *X) needFair() {
	x.T.Helper()
	if err := x.sharesFairly(); err != nil {
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter: %v", x.h.Name(), err)
	}
}

// fairQueue declares a Fair Exclusive queue with one message per batch, so that its batches
// run one at a time, in the order the backend hands them out.
func fairQueue(x *X, cfg txmq.QueueConfig[Msg]) *txmq.Queue[Msg] {
	cfg.Fair, cfg.Exclusive, cfg.MaxBatchMessages = true, true, 1
	return declare(x, cfg)
}

// publishBig publishes count messages "big-i" of fairness key "big" in one call; with
// emptyKey, of the empty key instead (no FairKey option), so that a lone batch that lost its
// key on some path would share the backlog's lane and the property would see it.
func publishBig(x *X, ctx context.Context, q *txmq.Queue[Msg], n *txmq.Node, count int, emptyKey bool) error {
	msgs := make([]Msg, count)
	for i := range msgs {
		msgs[i] = Msg{K: fmt.Sprint("big-", i)}
	}
	if emptyKey {
		return q.PublishMany(ctx, n, msgs)
	}
	return q.PublishMany(ctx, n, msgs, txmq.FairKey("big"))
}

// waitBacklog waits until the backend holds want ready batches of q, as waitReady does but for
// up to maxProgressWait times Caps.Timeout while the count grows (as progressing does):
// storing 10,000 batches one row each takes longer than one Timeout on a loaded machine, and
// the property is about what runs after.
func waitBacklog(x *X, q *txmq.Queue[Msg], want int64) {
	x.T.Helper()
	raw := x.rawClient()
	var last int64
	start := time.Now()
	deadline := start.Add(x.Caps.Timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), x.Caps.Timeout)
		asked := time.Now()
		d, err := raw.Depths(ctx, []string{q.Name()})
		took := time.Since(asked)
		cancel()
		if err == nil {
			got := d[q.Name()].Ready
			if got >= want {
				return
			}
			if got > last { // still storing: wait on, up to maxProgressWait Timeouts in all
				deadline = time.Now().Add(x.Caps.Timeout)
				if hard := start.Add(maxProgressWait * x.Caps.Timeout); deadline.After(hard) {
					deadline = hard
				}
				last = got
			}
		}
		if time.Now().After(deadline) {
			x.T.Fatalf("the backlog of %d batches was not stored in time (%d stored)", want, last)
		}
		// Polling the backend's count, not a synchronisation: a count of a 10,000-batch backlog
		// reads every row on some backends (SQL jobs), so the poll sleeps four times as long
		// as the count took, and leaves the storing most of the machine.
		time.Sleep(max(50*time.Millisecond, 4*took))
	}
}

// firstRun returns the position (from 1) of the first run of k in ran, 0 when it did not run.
func firstRun(ran []string, k string) int {
	return slices.Index(ran, k) + 1
}

// fairDeclare: on an adapter without fair share, a Fair queue is refused with an error naming
// the queue and saying the adapter does not share fairly, by NewNode (declared before) and by
// Listen and Publish (declared after the node). On one with it, a fairness key on a queue that
// is not Fair, and an invalid one, are errors naming the queue.
func fairDeclare(x *X) {
	refused := func(err error, queue, call string) {
		x.T.Helper()
		if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), queue) || !strings.Contains(err.Error(), "does not") {
			x.T.Fatalf("%s with Fair queue %q on adapter %s: %v; want ErrInvalidConfig naming the queue and saying the adapter does not share claims fairly", call, queue, x.h.Name(), err)
		}
	}
	if ferr := x.sharesFairly(); ferr != nil {
		q := declare(x, txmq.QueueConfig[Msg]{Fair: true})
		c, _ := x.client()
		_, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger})
		refused(err, q.Name(), "NewNode")
		reg := txmq.NewRegistry()
		n := x.nodeOnRegistry(reg)
		q2, derr := txmq.DeclareIn(reg, x.queueName(), txmq.QueueConfig[Msg]{Transactional: txmq.Try, Fair: true})
		if derr != nil {
			x.T.Fatalf("DeclareIn: %v", derr)
		}
		refused(q2.Listen(n, func(context.Context, []Msg) error { return nil }), q2.Name(), "Listen")
		refused(q2.Publish(context.Background(), n, Msg{K: "a"}, txmq.FairKey("t1")), q2.Name(), "Publish")
		return
	}
	q := declare(x, txmq.QueueConfig[Msg]{Fair: true})
	plain := declare(x, txmq.QueueConfig[Msg]{})
	n := x.node(txmq.NodeOptions{})
	for _, c := range []struct {
		q    *txmq.Queue[Msg]
		key  string
		what string
	}{{plain, "t1", "a fairness key on a queue that is not Fair"}, {q, "", "an empty fairness key"}, {q, "a b", "a fairness key with a space"}, {q, strings.Repeat("k", core.MaxKeyBytes+1), "a fairness key too long"}} {
		if err := c.q.Publish(context.Background(), n, Msg{K: "a"}, txmq.FairKey(c.key)); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), c.q.Name()) {
			x.T.Fatalf("Publish with %s: %v; want ErrInvalidConfig naming queue %q", c.what, err, c.q.Name())
		}
	}
	for _, opts := range [][]txmq.PublishOption{{txmq.FairKey("tenant-1")}, nil} {
		if err := q.Publish(context.Background(), n, Msg{K: "a"}, opts...); err != nil {
			x.T.Fatalf("Publish on a Fair queue (options %d): %v", len(opts), err)
		}
	}
}

// fairLoneKey: 10,000 batches of key "big" published first, one of key "lone" after; the
// listener starts once all are stored, and the lone batch runs within fairBound runs.
func fairLoneKey(x *X) {
	x.needFair()
	q := fairQueue(x, txmq.QueueConfig[Msg]{})
	pub := x.node(txmq.NodeOptions{})
	if err := publishBig(x, x.ctx(), q, pub, fairBacklog, false); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	waitBacklog(x, q, int64(fairBacklog*x.copies()))
	if err := q.Publish(x.ctx(), pub, Msg{K: "lone"}, txmq.FairKey("lone")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitReady(x, q, int64((fairBacklog+1)*x.copies()))
	var l prioLog
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, nil)
	x.eventually(func() bool { return firstRun(l.snapshot(), "lone") > 0 }, "the lone key's batch to run")
	ran := l.snapshot()
	if at := firstRun(ran, "lone"); at > fairBound {
		x.T.Fatalf("the lone key's batch ran at run %d behind a backlog of %d; want within %d (round-robin across keys): first runs %v", at, fairBacklog, fairBound, ran[:min(len(ran), 10)])
	}
}

// fairMidBacklog: while the listener works through a backlog of key "big", a batch of key
// "lone" is published (the running batch holds the Exclusive queue until it is stored); it
// runs within fairBound runs after the one that was running.
func fairMidBacklog(x *X) {
	x.needFair()
	q := fairQueue(x, txmq.QueueConfig[Msg]{})
	pub := x.node(txmq.NodeOptions{})
	const backlog = 2000
	if err := publishBig(x, x.ctx(), q, pub, backlog, false); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	waitReady(x, q, int64(backlog*x.copies()))
	var l prioLog
	hold, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, func(ctx context.Context, m Msg) error {
		if len(l.snapshot()) == 3 {
			once.Do(func() {
				close(hold)
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
		}
		return nil
	})
	select {
	case <-hold:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("the listener did not reach its third run")
	}
	raw := x.rawClient()
	d, err := raw.Depths(x.ctx(), []string{q.Name()})
	if err != nil {
		x.T.Fatalf("Depths: %v", err)
	}
	before := d[q.Name()].Ready
	if err := q.Publish(x.ctx(), pub, Msg{K: "lone"}, txmq.FairKey("lone")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitDepth(x, q, func(d core.Depth) bool { return d.Ready >= before+int64(x.copies()) })
	close(release)
	x.eventually(func() bool { return firstRun(l.snapshot(), "lone") > 0 }, "the lone key's batch to run")
	ran := l.snapshot()
	if at := firstRun(ran, "lone") - 3; at > fairBound {
		x.T.Fatalf("the lone key's batch ran %d runs after it was stored mid-backlog; want within %d: runs %v", at, fairBound, ran[:min(len(ran), 12)])
	}
}

// fairThroughOutbox: a backlog and the lone batch published in RunInTx on a Require queue
// keep their fairness keys through the outbox: the lone batch runs within fairBound runs.
func fairThroughOutbox(x *X) {
	x.needFair()
	q := fairQueue(x, txmq.QueueConfig[Msg]{Transactional: txmq.Require})
	pub := x.node(txmq.NodeOptions{})
	s := x.store(x.rawClient(), outbox.Options{})
	const backlog = 500
	if err := s.RunInTx(x.ctx(), func(ctx context.Context, _ pgx.Tx) error {
		return publishBig(x, ctx, q, pub, backlog, true)
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	if err := s.RunInTx(x.ctx(), func(ctx context.Context, _ pgx.Tx) error {
		return q.Publish(ctx, pub, Msg{K: "lone"}, txmq.FairKey("lone"))
	}); err != nil {
		x.T.Fatalf("RunInTx: %v", err)
	}
	waitReady(x, q, backlog+1) // the outbox publishes through its own client: one copy each
	var l prioLog
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, nil)
	x.eventually(func() bool { return firstRun(l.snapshot(), "lone") > 0 }, "the lone key's batch to run")
	ran := l.snapshot()
	if at := firstRun(ran, "lone"); at > fairBound {
		x.T.Fatalf("the lone key's batch, through the outbox, ran at run %d; want within %d (the fairness key kept): first runs %v", at, fairBound, ran[:min(len(ran), 10)])
	}
}

// fairWithPriorities: on a Fair, Prioritized queue fairness comes first, priority within a
// key: the lone key's priority-0 batch runs within fairBound runs although the big key's
// batches have priority 9, and the big key's priority-9 batches run before its priority-0
// ones published first.
func fairWithPriorities(x *X) {
	x.needFair()
	x.needPriority()
	if err := core.SharesFairlyByPriority(x.rawClient()); err != nil {
		c, _ := x.client()
		declare(x, txmq.QueueConfig[Msg]{Fair: true, Prioritized: true})
		if _, err := txmq.NewNode(c, &txmq.NodeOptions{Registry: x.Registry, Logger: x.logger}); err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Fair and Prioritized") {
			x.T.Fatalf("NewNode with a Fair, Prioritized queue on adapter %s: %v; want ErrInvalidConfig saying it cannot rank a fair queue by priority", x.h.Name(), err)
		}
		x.unsupported.Store(true)
		x.T.Skipf("parity[%s]: not supported by the adapter (refused as it should be): %v", x.h.Name(), err)
	}
	q := fairQueue(x, txmq.QueueConfig[Msg]{Prioritized: true, PriorityAging: time.Hour})
	pub := x.node(txmq.NodeOptions{})
	const per = 50
	for _, p := range []int{0, 9} {
		msgs := make([]Msg, per)
		for i := range msgs {
			msgs[i] = Msg{K: fmt.Sprintf("big-p%d-%d", p, i)}
		}
		if err := q.PublishMany(x.ctx(), pub, msgs, txmq.FairKey("big"), txmq.Priority(p)); err != nil {
			x.T.Fatalf("PublishMany: %v", err)
		}
	}
	if err := q.Publish(x.ctx(), pub, Msg{K: "lone"}, txmq.FairKey("lone")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitReady(x, q, int64((2*per+1)*x.copies()))
	var l prioLog
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, nil)
	waitRuns(x, &l, (2*per+1)*x.copies())
	ran := l.snapshot()
	if at := firstRun(ran, "lone"); at > fairBound {
		x.T.Fatalf("the lone key's priority-0 batch ran at run %d behind the big key's priority-9 ones; want within %d (fairness before priority): first runs %v", at, fairBound, ran[:10])
	}
	var big []string
	for _, k := range ran {
		if k != "lone" {
			big = append(big, k)
		}
	}
	for i, k := range big[:per*x.copies()] {
		if !strings.HasPrefix(k, "big-p9-") {
			x.T.Fatalf("the big key's run %d is %s; want its priority-9 batches first (priority within a key): %v", i, k, big[:min(len(big), 20)])
		}
	}
}

// fairWithOrdering: on a Fair, Ordered queue the fairness key defaults to the ordering key,
// and an explicit FairKey groups ordering keys under a tenant: per-key order holds, and the
// lone tenant's batch runs within fairBound runs behind a tenant with many ordering keys.
func fairWithOrdering(x *X) {
	x.needFair()
	x.needOrdering()
	q := fairQueue(x, txmq.QueueConfig[Msg]{Ordered: true})
	pub := x.node(txmq.NodeOptions{})
	const orders, steps = 100, 3
	for s := range steps {
		for o := range orders {
			if err := q.Publish(x.ctx(), pub, Msg{K: fmt.Sprintf("big-o%d-s%d", o, s)}, txmq.Key(fmt.Sprint("o", o)), txmq.FairKey("big")); err != nil {
				x.T.Fatalf("Publish: %v", err)
			}
		}
	}
	if err := q.Publish(x.ctx(), pub, Msg{K: "lone"}, txmq.Key("lone-order")); err != nil { // the fairness key is the ordering key
		x.T.Fatalf("Publish: %v", err)
	}
	waitDepth(x, q, func(d core.Depth) bool {
		return d.Ready+d.Delayed >= int64((orders*steps+1)*x.copies()) && d.Ready >= orders+1
	})
	var l prioLog
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, nil)
	waitRuns(x, &l, (orders*steps+1)*x.copies())
	ran := l.snapshot()
	if at := firstRun(ran, "lone"); at > fairBound {
		x.T.Fatalf("the lone tenant's batch ran at run %d; want within %d: first runs %v", at, fairBound, ran[:10])
	}
	last := map[string]int{}
	for _, k := range ran {
		var o, s int
		if k == "lone" {
			continue
		}
		if _, err := fmt.Sscanf(k, "big-o%d-s%d", &o, &s); err != nil {
			x.T.Fatalf("unexpected message %q", k)
		}
		key := fmt.Sprint(o)
		if prev, ok := last[key]; ok && s < prev {
			x.T.Fatalf("ordering key o%d ran step %d after step %d: per-key order broken under fairness", o, s, prev)
		}
		last[key] = s
	}
}

// fairRestart: a node working through the big key's backlog crashes while the lone key's batch
// is stored; a new node runs the lone batch within fairBound runs (the crashed node's batch
// coming back after its lease takes the big key's turn at most).
func fairRestart(x *X) {
	x.needFair()
	q := fairQueue(x, txmq.QueueConfig[Msg]{})
	pub := x.node(txmq.NodeOptions{})
	const backlog = 2000
	if err := publishBig(x, x.ctx(), q, pub, backlog, false); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	waitReady(x, q, backlog)
	started := make(chan struct{}, 1)
	a := x.node(txmq.NodeOptions{})
	if err := q.Listen(a, func(ctx context.Context, _ []Msg) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	select {
	case <-started:
	case <-time.After(x.Caps.Timeout):
		x.T.Fatalf("node A never ran a batch")
	}
	if err := q.Publish(x.ctx(), pub, Msg{K: "lone"}, txmq.FairKey("lone")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	waitReady(x, q, backlog) // the backlog minus the running batch, plus the lone one
	txmqtest.Halt(a)
	var l prioLog
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, nil)
	x.eventually(func() bool { return firstRun(l.snapshot(), "lone") > 0 }, "the lone key's batch to run on the new node")
	ran := l.snapshot()
	if at := firstRun(ran, "lone"); at > fairBound {
		x.T.Fatalf("after a restart the lone key's batch ran at run %d on the new node; want within %d: first runs %v", at, fairBound, ran[:min(len(ran), 10)])
	}
}

// fairThroughHandoff: a backlog of the empty key is stored; during an outage the node hands
// the lone batch to the outbox; after Restore the outbox's sweep publishes it (reading its
// fairness key from its envelope), and the lone batch runs within fairBound runs (had the
// sweep lost its key, it would join the backlog's lane). The backlog is published before the
// outage: handing off a batch costs a write that waits for the backend's timeout (a whole
// ClaimTimeout where the outage hangs connections, as on Redis behind the proxy), and what
// the property checks is the lone batch's path.
func fairThroughHandoff(x *X) {
	x.needFair()
	q := fairQueue(x, txmq.QueueConfig[Msg]{})
	s := x.store(x.rawClient(), outbox.Options{RecoveryAge: 300 * time.Millisecond, SweepInterval: 200 * time.Millisecond, BackoffBase: 200 * time.Millisecond, BackoffMax: time.Second})
	n := x.node(txmq.NodeOptions{Handoff: s})
	const backlog = 300
	if err := publishBig(x, x.ctx(), q, n, backlog, true); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	waitReady(x, q, backlog)
	x.Env.Break(x.T)
	restored := false
	defer func() {
		if !restored {
			x.Env.Restore(x.T)
		}
	}()
	if err := q.Publish(x.ctx(), n, Msg{K: "lone"}, txmq.FairKey("lone")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	x.eventually(func() bool { st := n.Stats(); return st.Buffered == 0 && st.HandedOff > 0 }, func() string {
		return fmt.Sprintf("buffered publishes handed to the outbox: %+v", n.Stats())
	})
	x.Env.Restore(x.T)
	restored = true
	if err := s.Start(x.ctx()); err != nil {
		x.T.Fatalf("Store.Start: %v", err)
	}
	waitReady(x, q, backlog+1) // the sweep publishes through the store's own client: one copy each
	var l prioLog
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, nil)
	x.eventually(func() bool { return firstRun(l.snapshot(), "lone") > 0 }, "the lone key's batch to run")
	ran := l.snapshot()
	if at := firstRun(ran, "lone"); at > fairBound {
		x.T.Fatalf("the lone key's batch, handed to the outbox and swept, ran at run %d; want within %d (the fairness key kept): first runs %v", at, fairBound, ran[:min(len(ran), 10)])
	}
}

// fairReplay: the lone key's batch is dead-lettered (a budget of one run), a backlog of key
// "big" is stored, and the dead letter is replayed: the replay keeps its fairness key, so it
// runs within fairBound runs of the new listener.
func fairReplay(x *X) {
	x.needFair()
	q := fairQueue(x, txmq.QueueConfig[Msg]{MaxAttempts: 1})
	s := x.store(x.rawClient(), outbox.Options{})
	a := x.node(txmq.NodeOptions{DeadLetters: s})
	if err := q.Listen(a, func(context.Context, []Msg) error { return errors.New("fails: dead-letter it") }); err != nil {
		x.T.Fatalf("Listen: %v", err)
	}
	if err := q.Publish(x.ctx(), a, Msg{K: "lone"}, txmq.FairKey("lone")); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	var dead []outbox.DeadLetterRow
	x.eventually(func() bool {
		var err error
		dead, err = s.ListDeadLetters(x.ctx(), outbox.DLQFilter{Queue: q.Name(), State: outbox.DLQDead})
		if err != nil {
			x.T.Fatalf("ListDeadLetters: %v", err)
		}
		return len(dead) >= 1
	}, "the lone batch dead-lettered after its one run")
	txmqtest.Halt(a)
	pub := x.node(txmq.NodeOptions{})
	const backlog = 300
	if err := publishBig(x, x.ctx(), q, pub, backlog, true); err != nil {
		x.T.Fatalf("PublishMany: %v", err)
	}
	waitReady(x, q, int64(backlog*x.copies()))
	if err := s.Replay(x.ctx(), dead[0].ID); err != nil {
		x.T.Fatalf("Replay: %v", err)
	}
	waitReady(x, q, int64(backlog*x.copies()+1))
	var l prioLog
	listenLog(x, q, x.node(txmq.NodeOptions{}), &l, nil)
	x.eventually(func() bool { return firstRun(l.snapshot(), "lone") > 0 }, "the replayed batch to run")
	ran := l.snapshot()
	if at := firstRun(ran, "lone"); at > fairBound {
		x.T.Fatalf("the lone key's replayed dead letter ran at run %d; want within %d (the fairness key kept by the replay): first runs %v", at, fairBound, ran[:min(len(ran), 10)])
	}
}

// waitRuns waits until l holds want runs, for as long as runs keep coming (x.progressing): on
// a loaded machine, or a pooler that leaves the claims to polling, a backlog of hundreds of
// ordered batches drains slower than one timeout, but it drains.
func waitRuns(x *X, l *prioLog, want int) {
	x.T.Helper()
	x.progressing(func() bool { return len(l.snapshot()) >= want }, func() any { return len(l.snapshot()) }, func() string {
		return fmt.Sprintf("every batch to run: %d of %d ran", len(l.snapshot()), want)
	})
}
